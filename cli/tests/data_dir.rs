//! The data directory is private to its user, the real binary under a umask
//! that takes nothing away (000): made by `serve` and by `keys create`, the
//! directory (and any parent it made) is 0700 and the store 0600. One made readable by others is
//! warned about with the `chmod` that fixes it, and left as it is.

#![cfg(unix)]

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// `executor ARGS` run by a shell that first sets the umask to 000.
fn under_open_umask(args: &[&str]) -> Command {
    let mut command = Command::new("sh");
    command
        .args(["-c", "umask 000; exec \"$0\" \"$@\"", env!("CARGO_BIN_EXE_executor")])
        .args(args)
        .env_remove("EXECUTOR_PUBLIC_URL");
    command
}

fn run(args: &[&str]) -> Output {
    let out = under_open_umask(args).output().expect("run executor");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    out
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())).permissions().mode() & 0o777
}

#[test]
fn the_shell_really_sets_an_open_umask() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("probe");
    let status = Command::new("sh").args(["-c", "umask 000; : > \"$0\"", file.to_str().unwrap()]).status().unwrap();
    assert!(status.success());
    assert_eq!(mode(&file), 0o666, "a file made under this umask is open to everyone");
}

#[test]
fn keys_create_makes_a_private_data_directory_and_store() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("nested").join("data");
    let out = run(&["keys", "create", "--owner", "alice", "--data-dir", data.to_str().unwrap()]);
    assert_eq!((mode(&data.join("..")), mode(&data)), (0o700, 0o700), "the directories it made");
    assert_eq!(mode(&data.join("executor.redb")), 0o600);
    assert!(!String::from_utf8_lossy(&out.stderr).contains("warning"), "nothing to warn about");
}

#[test]
fn serve_makes_a_private_data_directory_store_and_keys() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut child = under_open_umask(&["serve", "--addr", "127.0.0.1:0", "--data-dir", data.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start executor serve");
    // The first line comes once everything is made and listening.
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut first).unwrap();
    let modes = [data.clone(), data.join("executor.redb"), data.join("request-state.key"), data.join("admin.sock")]
        .map(|path| std::fs::metadata(path).ok().map(|m| m.permissions().mode() & 0o777));
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(first.starts_with("Executor is listening on "), "{first}");
    let expected = [0o700, 0o600, 0o600, 0o600].map(Some);
    assert_eq!(modes, expected, "data dir, store, key file, admin socket");
}

#[test]
fn a_store_others_can_read_is_warned_about_with_the_chmod_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let data_arg = data.to_str().unwrap();
    run(&["keys", "create", "--owner", "alice", "--data-dir", data_arg]);
    let store = data.join("executor.redb");
    // As an earlier version left them.
    std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&store, std::fs::Permissions::from_mode(0o644)).unwrap();

    let stderr = String::from_utf8(run(&["keys", "list", "--data-dir", data_arg]).stderr).unwrap();
    let expected = [
        format!(
            "executor: warning: {data_arg} can be opened by other users of this machine (mode 755); make it \
             private with: chmod 700 {data_arg}"
        ),
        format!(
            "executor: warning: {0} can be opened by other users of this machine (mode 644); make it private \
             with: chmod 600 {0}",
            store.display()
        ),
    ];
    assert_eq!(stderr.lines().collect::<Vec<_>>(), expected, "{stderr}");
    assert_eq!((mode(&data), mode(&store)), (0o755, 0o644), "an existing directory is the user's to change");

    // Once the user has run them: no warning.
    for line in &expected {
        let chmod = line.split("with: ").nth(1).unwrap();
        assert!(Command::new("sh").args(["-c", chmod]).status().unwrap().success(), "{chmod}");
    }
    assert_eq!(String::from_utf8(run(&["keys", "list", "--data-dir", data_arg]).stderr).unwrap(), "");
}

/// `executor serve` as another user than the data directory's owner, as in
/// a container whose bind-mounted `/data` belongs to root on the host: it
/// stops before making anything, saying what to do. As root, the test runs
/// the server as `nobody` (`setpriv`); otherwise the directory is made
/// read-only for this user.
#[test]
fn serve_on_a_data_directory_it_cannot_write_says_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let root = rustix::process::geteuid().is_root();
    let mut command = if root {
        // Others may enter the temp directory, as any directory above a mount point.
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o755)).unwrap();
        let mut command = Command::new("setpriv");
        command.args(["--reuid=65534", "--regid=65534", "--clear-groups", env!("CARGO_BIN_EXE_executor")]);
        command
    } else {
        std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o500)).unwrap();
        Command::new(env!("CARGO_BIN_EXE_executor"))
    };
    let out = command
        .args(["serve", "--addr", "127.0.0.1:0", "--data-dir", data.to_str().unwrap()])
        .env_remove("EXECUTOR_PUBLIC_URL")
        .env("HOME", dir.path())
        .output()
        .expect("run executor serve");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    let uid = if root { 65534 } else { rustix::process::geteuid().as_raw() };
    let display = data.display();
    assert!(
        stderr.contains(&format!("{display} is not writable by this process (user id {uid})"))
            && stderr.contains(&format!("chown -R {uid} {display}"))
            && stderr.contains("a bind-mounted directory keeps its owner from the host"),
        "{stderr}"
    );
    assert_eq!(std::fs::read_dir(&data).unwrap().count(), 0, "nothing was made in it");
}
