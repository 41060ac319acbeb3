//! The `executor` command. `executor serve` arrives with the MCP host; today
//! the command manages API keys in the local data dir.

mod keys;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "executor",
    version,
    about = "Code-mode MCP gateway: runs agent code against your tools, pausing sensitive calls for approval."
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Manage API keys (bearer tokens) of the local store.
    Keys {
        #[command(subcommand)]
        command: KeysCommand,
    },
}

#[derive(Subcommand)]
enum KeysCommand {
    /// Create a key for OWNER and print its token once; only its hash is stored.
    Create {
        /// The principal the key authenticates, e.g. your name or email.
        #[arg(long)]
        owner: String,
        /// Where the embedded store lives.
        #[arg(long, default_value = ".executor")]
        data_dir: PathBuf,
    },
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        None => {
            // Nothing to run yet without a subcommand: show what there is.
            let _ = Cli::command().print_help();
            return ExitCode::SUCCESS;
        }
        Some(Command::Keys { command: KeysCommand::Create { owner, data_dir } }) => {
            keys::create(&owner, &data_dir).await.map(|token| {
                println!("Created an API key for {owner}. This is the only time the token is shown:\n\n{token}\n");
            })
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("executor: {error}");
            ExitCode::FAILURE
        }
    }
}
