//! `sapc gen python FILE -o OUT.py`: the program's types and functions as a typed Python
//! module for `saplang` (`session::python`).

use std::path::PathBuf;

use session::{cache, compile, load_program};

use crate::exit;
use crate::run::failed;

#[derive(clap::Subcommand)]
pub enum GenCommand {
    /// Pydantic models for the program's structs, enums for its enums, and a `Program`
    /// class whose typed methods call its functions through `saplang`.
    Python {
        /// The program.
        file: PathBuf,
        /// Where to write the module (default: standard output).
        #[arg(short, long, value_name = "OUT.py")]
        output: Option<PathBuf>,
    },
}

pub fn run(command: GenCommand) -> u8 {
    let GenCommand::Python { file, output } = command;
    let result = (|| -> Result<u8, String> {
        let inputs = cache::Inputs::read(&file)?;
        let module = match load_program(&inputs).and_then(|p| compile(&p)) {
            Ok(module) => module,
            Err(failure) => return failed(failure),
        };
        let text = session::python::python_module(&module, &file.display().to_string());
        match output {
            Some(path) => std::fs::write(&path, text)
                .map_err(|e| format!("cannot write {}: {e}", path.display()))?,
            None => print!("{text}"),
        }
        Ok(exit::OK)
    })();
    result.unwrap_or_else(|message| {
        eprintln!("error: {message}");
        exit::USAGE
    })
}
