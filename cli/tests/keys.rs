//! `executor keys create` end to end: the real binary, the real store file.

use std::process::Command;

use executor_core::TokenHash;
use executor_store::{EmbeddedStore, KeyStore};

fn executor(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_executor")).args(args).output().expect("run executor")
}

#[tokio::test]
async fn keys_create_prints_a_token_once_and_stores_only_its_hash() {
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("data");
    let data = data_dir.to_str().unwrap();

    let first = executor(&["keys", "create", "--owner", "alice", "--data-dir", data]);
    assert!(first.status.success(), "{}", String::from_utf8_lossy(&first.stderr));
    let stdout = String::from_utf8(first.stdout).unwrap();
    let token = stdout.split_whitespace().find(|w| w.starts_with("exk_")).expect("a token in the output").to_owned();
    assert_eq!(token.len(), 4 + 64, "256 bits, hex encoded");

    let second = executor(&["keys", "create", "--owner", "alice", "--data-dir", data]);
    let second = String::from_utf8(second.stdout).unwrap();
    assert!(!second.contains(&token), "every key gets a fresh token");

    let file = std::fs::read(data_dir.join("executor.redb")).unwrap();
    assert!(!file.windows(token.len()).any(|w| w == token.as_bytes()), "the token itself is never stored");

    let store = EmbeddedStore::open(&data_dir).unwrap();
    assert_eq!(store.find_key(&TokenHash::of_token(&token)).await.unwrap().owner.as_str(), "alice");
}

#[test]
fn keys_create_rejects_a_bad_owner_with_a_clear_message() {
    let dir = tempfile::tempdir().unwrap();
    let out = executor(&["keys", "create", "--owner", " ", "--data-dir", dir.path().to_str().unwrap()]);
    assert!(!out.status.success());
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("invalid --owner: owner name is empty"), "{stderr}");
}

#[test]
fn keys_are_listed_and_revoked_by_id() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    assert!(executor(&["keys", "create", "--owner", "alice", "--data-dir", data]).status.success());
    let scoped = executor(&["keys", "create", "--owner", "bob", "--toolkit", "support", "--data-dir", data]);
    assert!(String::from_utf8_lossy(&scoped.stdout).contains("scoped to toolkit support"));
    let bad = executor(&["keys", "create", "--owner", "bob", "--toolkit", "Sup/port", "--data-dir", data]);
    assert!(String::from_utf8_lossy(&bad.stderr).contains("invalid --toolkit"), "a bad toolkit name is refused");
    let listed = String::from_utf8(executor(&["keys", "list", "--data-dir", data]).stdout).unwrap();
    let lines: Vec<&str> = listed.lines().collect();
    assert_eq!(lines.len(), 3, "{listed}");
    let header = ["ID", "OWNER", "SCOPE", "CREATED", "LAST", "USED"];
    assert_eq!(lines[0].split_whitespace().collect::<Vec<_>>(), header, "a header row");
    assert!(lines[1..].iter().all(|l| l.ends_with("  never")), "no key was used yet: {listed}");
    assert!(lines[1].contains("alice") && lines[2].contains("bob"), "oldest first: {listed}");
    assert!(lines[1].contains(" all ") && lines[2].contains(" toolkit support "), "each key's scope: {listed}");
    let bob_id = lines[2].split_whitespace().next().unwrap();
    assert_eq!(bob_id.len(), 12);

    let short = executor(&["keys", "revoke", &bob_id[..5], "--data-dir", data]);
    assert!(!short.status.success());
    let stderr = String::from_utf8_lossy(&short.stderr);
    assert!(stderr.contains("too short") && stderr.contains("at least 6 characters"), "{stderr}");

    let revoked = executor(&["keys", "revoke", &bob_id[..6], "--data-dir", data]);
    assert!(revoked.status.success(), "{}", String::from_utf8_lossy(&revoked.stderr));
    let stdout = String::from_utf8_lossy(&revoked.stdout);
    let created = lines[2].split_whitespace().nth(4).unwrap();
    assert_eq!(stdout.trim(), format!("Revoked key {bob_id} of bob (scope toolkit support, created {created})."));
    let listed = String::from_utf8(executor(&["keys", "list", "--data-dir", data]).stdout).unwrap();
    assert!(listed.contains("alice") && !listed.contains("bob"), "{listed}");
    let again = executor(&["keys", "revoke", bob_id, "--data-dir", data]);
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("no key has the id"));
}

#[test]
fn commands_that_read_a_store_never_create_one() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nowhere");
    let data = missing.to_str().unwrap();
    let reads: [&[&str]; 11] = [
        &["keys", "list"],
        &["keys", "revoke", "0123456789ab"],
        &["grants", "list", "--owner", "alice"],
        &["grants", "list"],
        &["grants", "revoke", "g1"],
        &["connections", "list", "--owner", "alice"],
        &["connections", "disconnect", "--owner", "alice", "gh"],
        &["executions", "list"],
        &["executions", "list", "--owner", "alice", "--since", "24h"],
        &["executions", "show", "e1"],
        &["audit", "export", "--since", "7d"],
    ];
    for args in reads {
        let out = executor(&[args, &["--data-dir", data]].concat());
        assert!(!out.status.success(), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(&format!("there is no data directory at {data}"))
                && stderr.contains("pass the --data-dir that `executor serve` uses"),
            "{args:?}: {stderr}"
        );
        assert!(!missing.exists(), "{args:?} made the data directory");
    }

    // A directory without a store (a mistyped path that exists): nothing is made in it either.
    let empty = dir.path().to_str().unwrap();
    let out = executor(&["keys", "list", "--data-dir", empty]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&format!("{empty} holds no store (executor.redb)")), "{stderr}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "nothing was made in it");

    // `keys create` is how a store begins: it makes one.
    assert!(executor(&["keys", "create", "--owner", "alice", "--data-dir", data]).status.success());
    assert!(executor(&["keys", "list", "--data-dir", data]).status.success());
}

#[test]
fn help_lists_the_commands() {
    let out = executor(&["--help"]);
    assert!(out.status.success());
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(stdout.contains("Usage: executor") && stdout.contains("serve") && stdout.contains("keys"), "{stdout}");
}
