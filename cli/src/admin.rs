//! The admin socket: how `executor keys`, `executor grants` and the other
//! admin commands (`crate::commands`) reach a running `executor serve`.
//!
//! The embedded store admits one process at a time (redb locks its file), so
//! while the server runs, a command cannot open it. The server therefore
//! listens on a Unix socket in its data directory, `admin.sock`, and runs the
//! commands it receives on the store it holds: a key or grant is created or
//! revoked without stopping the server, and takes effect on the next request
//! (a revoked key is also dropped from the server's verified keys, through
//! the `revoked` callback).
//!
//! Only the user who runs the server can use it: the socket is mode 0600, and
//! every connection's peer credentials are checked against the socket's owner
//! too (that also covers the instant between `bind` and `chmod`). The protocol
//! is one JSON line each way: a [`Command`], then `{"Ok": <Reply>}` or
//! `{"Err": "<message>"}`. An answer is bounded by its command: a listing by
//! its limit, and the audit export, which can be any length, is asked for a
//! page at a time (`crate::audit`).

use std::io;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::task::JoinHandle;

use crate::commands::{AdminStore, run};
pub use crate::commands::{Command, Reply};
use crate::keys;

/// The socket's name in the data directory.
pub const SOCKET: &str = "admin.sock";
/// A command is a few dozen bytes; anything longer is not one.
const MAX_LINE: u64 = 4096;

#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    #[error(
        "the server using this data directory did not let this command in through {path} ({error}); \
         run `executor keys` as the user who runs `executor serve`"
    )]
    Refused { path: PathBuf, error: io::Error },
    #[error("the server using this data directory did not answer properly through {path} ({detail}); try again")]
    Protocol { path: PathBuf, detail: String },
}

/// The socket of a running server; dropping it stops listening and removes the file.
pub struct AdminSocket {
    path: PathBuf,
    task: JoinHandle<()>,
}

impl Drop for AdminSocket {
    fn drop(&mut self) {
        self.task.abort();
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Listen in `data_dir` for commands and run them on `store`, calling
/// `revoked` after a key was revoked. The caller holds the store, so no other
/// server uses this directory: a socket file left there by one that crashed
/// is replaced.
pub fn listen<S: AdminStore + 'static>(
    data_dir: &Path,
    store: Arc<S>,
    revoked: impl Fn() + Send + Sync + 'static,
) -> io::Result<AdminSocket> {
    let revoked: Arc<dyn Fn() + Send + Sync> = Arc::new(revoked);
    let path = data_dir.join(SOCKET);
    match std::fs::remove_file(&path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    let listener = UnixListener::bind(&path)?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
    let owner = std::fs::metadata(&path)?.uid();
    let task = tokio::spawn(async move {
        loop {
            let stream = match listener.accept().await {
                Ok((stream, _)) => stream,
                Err(error) => {
                    // Out of file descriptors, say: give the server a moment rather than spin.
                    tracing::warn!(%error, "the admin socket could not accept a connection");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    continue;
                }
            };
            match stream.peer_cred() {
                Ok(peer) if peer.uid() == owner => {
                    tokio::spawn(serve(stream, store.clone(), revoked.clone()));
                }
                _ => tracing::warn!("refused a connection to the admin socket from another user"),
            }
        }
    });
    Ok(AdminSocket { path, task })
}

/// One command, one answer.
async fn serve<S: AdminStore>(stream: UnixStream, store: Arc<S>, revoked: Arc<dyn Fn() + Send + Sync>) {
    let (read, mut write) = stream.into_split();
    let mut line = String::new();
    if BufReader::new(read.take(MAX_LINE)).read_line(&mut line).await.is_err() {
        return;
    }
    let answer: Result<Reply, String> = match serde_json::from_str::<Command>(&line) {
        Ok(command) => run(&*store, command).await,
        Err(e) => Err(format!("not an admin command ({e}); use an `executor` of the same version as the server")),
    };
    if let Ok(Reply::Keys(keys::Reply::Revoked { .. })) = &answer {
        revoked();
    }
    let mut text = serde_json::to_string(&answer).unwrap_or_default();
    text.push('\n');
    let _ = write.write_all(text.as_bytes()).await;
}

/// Send `command` to the server running on `data_dir`; `None` when none is
/// running there (no socket, or one left by a server that stopped).
pub async fn send(data_dir: &Path, command: &Command) -> Result<Option<Result<Reply, String>>, AdminError> {
    let path = data_dir.join(SOCKET);
    let stream = match UnixStream::connect(&path).await {
        Ok(stream) => stream,
        Err(e) if matches!(e.kind(), io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused) => return Ok(None),
        Err(error) => return Err(AdminError::Refused { path, error }),
    };
    let protocol = |detail: String| AdminError::Protocol { path: path.clone(), detail };
    let (read, mut write) = stream.into_split();
    let mut text = serde_json::to_string(command).map_err(|e| protocol(e.to_string()))?;
    text.push('\n');
    write.write_all(text.as_bytes()).await.map_err(|e| protocol(e.to_string()))?;
    let mut line = String::new();
    BufReader::new(read).read_line(&mut line).await.map_err(|e| protocol(e.to_string()))?;
    serde_json::from_str(&line).map(Some).map_err(|e| protocol(format!("{e} in {line:?}")))
}
