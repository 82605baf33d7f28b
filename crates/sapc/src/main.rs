//! `sapc`: the command-line front end. It owns the terminal and the file system; the
//! compiler crates below it take text and return data.

#![forbid(unsafe_code)]

mod args;
mod check;
mod codegen_python;
mod journal;
mod mcp;
mod run;
mod serve;
mod test;
mod trace;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

/// Programs allocate many small objects (list cells, strings, JSON), which mimalloc
/// serves much faster than the system allocator, and grow large lists, which the
/// system allocator grows without copying (see `codegen_jit::Allocator`).
#[global_allocator]
static ALLOCATOR: codegen_jit::Allocator = codegen_jit::Allocator;

#[derive(Parser)]
#[command(
    name = "sapc",
    version,
    about = "The sap compiler: structured agent procedures"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Parse and check sap files; directories are searched for `*.sap` recursively.
    Check {
        /// Files or directories to check (default: the current directory).
        paths: Vec<PathBuf>,
        /// How to print diagnostics.
        #[arg(long, value_enum, default_value_t = Format::Human)]
        format: Format,
        /// Also warn at each LLM call site where the answer's type has constraints this
        /// provider's structured output does not enforce: `openai`, `anthropic`,
        /// `llamacpp`, `ollama` or `gemini`.
        #[arg(long, value_name = "NAME")]
        target: Option<String>,
    },
    /// Check and lower a program into the build cache, so `run` starts at once.
    Build {
        /// The program.
        file: PathBuf,
        /// Also print the lowered module (the IR) on standard output.
        #[arg(long)]
        emit_ir: bool,
    },
    /// Check and run a program's `main`.
    Run(Box<args::RunCommand>),
    /// Run the `test "name" { … }` items of sap files, with the model's answers
    /// scripted by their `given`s; exits 1 when one fails.
    Test(Box<test::TestArgs>),
    /// Run the language server on standard input and output.
    Lsp,
    /// Traces of runs (`sapc run --trace`), for people: show one as a tree or a page,
    /// diff two.
    Trace {
        #[command(subcommand)]
        command: trace::TraceCommand,
    },
    /// Journals of durable runs (`sapc run --journal`): list the calls, forget one.
    Journal {
        #[command(subcommand)]
        command: journal::JournalCommand,
    },
    /// Code for other languages from a program: `gen python` writes its types and
    /// functions as a typed Python module for `saplang`.
    Gen {
        #[command(subcommand)]
        command: codegen_python::GenCommand,
    },
    /// Serve a program as an editor's agent over the Agent Client Protocol (standard
    /// input and output): each prompt runs `fn main(ctx: Context, prompt: String)`
    /// in the session's context. Takes `run`'s flags; `--journal DIR` keeps sessions
    /// there, for `session/load` after a restart.
    Acp(Box<args::RunArgs>),
    /// Serve a program's `export fn`s as a durable service on Restate: each function a
    /// handler of the service named after the file, each model, tool and I/O call a step
    /// of the invocation's journal. Takes `run`'s flags (`--journal` excepted: Restate
    /// keeps the journal)
    Serve(Box<ServeArgs>),
    /// MCP servers: import their tools as a typed sap module, list them, or serve a
    /// program's `export fn`s as one.
    Mcp {
        #[command(subcommand)]
        command: mcp::McpCommand,
    },
}

/// `sapc serve --restate HOST:PORT FILE [flags]`.
#[derive(clap::Args)]
struct ServeArgs {
    /// The address to serve Restate's requests at, as HOST:PORT (`127.0.0.1:9080`);
    /// workers of the same program may share it
    #[arg(long, value_name = "HOST:PORT", required = true)]
    restate: String,
    #[command(flatten)]
    run: args::RunArgs,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Rendered for people, on standard error.
    Human,
    /// One JSON object per diagnostic per line, on standard output.
    Json,
    /// GitHub Actions workflow commands, on standard output.
    Github,
}

/// Exit statuses shared by every subcommand.
pub mod exit {
    pub const OK: u8 = 0;
    pub const ERRORS: u8 = 1;
    pub const USAGE: u8 = 2;
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() {
                exit::USAGE
            } else {
                exit::OK
            });
        }
    };
    match cli.command {
        Command::Check {
            paths,
            format,
            target,
        } => ExitCode::from(check::run(paths, format, target.as_deref())),
        Command::Build { file, emit_ir } => ExitCode::from(run::build(&file, emit_ir)),
        Command::Run(args) => ExitCode::from(run::run(*args)),
        Command::Test(args) => ExitCode::from(test::run(*args)),
        Command::Acp(args) => ExitCode::from(serve_acp(*args)),
        Command::Serve(args) => ExitCode::from(serve_restate(*args)),
        Command::Mcp { command } => ExitCode::from(mcp::run(command)),
        Command::Gen { command } => ExitCode::from(codegen_python::run(command)),
        Command::Trace { command } => ExitCode::from(trace::run(command)),
        Command::Journal { command } => ExitCode::from(journal::run(command)),
        // LSP: 0 after `shutdown` then `exit`, 1 when the client left without `shutdown`.
        Command::Lsp => match lsp::run_stdio() {
            Ok(true) => ExitCode::from(exit::OK),
            Ok(false) => ExitCode::from(1),
            Err(e) => {
                eprintln!("error: the language server stopped: {e}");
                ExitCode::from(exit::USAGE)
            }
        },
    }
}

/// `sapc serve --restate HOST:PORT FILE [flags]`.
fn serve_restate(args: ServeArgs) -> u8 {
    if args.run.engine != "jit" {
        eprintln!("error: `sapc serve` runs native code only (`--engine jit`)");
        return exit::USAGE;
    }
    if !args.run.args.is_empty() {
        eprintln!(
            "error: `sapc serve` takes no program arguments: each invocation's body holds them"
        );
        return exit::USAGE;
    }
    restate::serve(&args.run.file, &args.restate, args.run.options())
}

/// `sapc acp FILE [flags]`.
fn serve_acp(args: args::RunArgs) -> u8 {
    if args.engine != "jit" {
        eprintln!("error: `sapc acp` runs native code only (`--engine jit`)");
        return exit::USAGE;
    }
    if !args.args.is_empty() {
        eprintln!("error: `sapc acp` takes no program arguments: each prompt is `main`'s");
        return exit::USAGE;
    }
    acp::serve(&args.file, args.options())
}

impl From<Format> for session::render::Format {
    fn from(format: Format) -> session::render::Format {
        match format {
            Format::Human => session::render::Format::Human,
            Format::Json => session::render::Format::Json,
            Format::Github => session::render::Format::Github,
        }
    }
}
