//! The `executor` command run as a person runs it, for the tests of the
//! binary (`env!("CARGO_BIN_EXE_executor")`, which only those tests know).

use std::path::Path;
use std::process::Command;

/// `executor keys create` for `owner` on the data in `data`, the real
/// command `executor` (the binary's path): the token it prints.
pub fn create_key(executor: &str, data: &Path, owner: &str) -> String {
    let output = Command::new(executor)
        .args(["keys", "create", "--owner", owner])
        .arg("--data-dir")
        .arg(data)
        .output()
        .expect("run executor keys create");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let stdout = String::from_utf8(output.stdout).unwrap();
    stdout.lines().map(str::trim).find(|l| l.starts_with("exk_")).expect("a token").to_owned()
}
