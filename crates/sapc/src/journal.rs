//! `sapc journal`: what a durable run's journal (`sapc run --journal PATH`) holds, and
//! forgetting a call so that the next run makes it again.

use std::path::PathBuf;

use ::journal;
use clap::Subcommand;

use crate::exit;

#[derive(Subcommand)]
pub enum JournalCommand {
    /// List the calls a journal holds, in program order: place, kind, what was called,
    /// where, and the answer (or that it never finished).
    Show {
        path: PathBuf,
        /// Characters of each answer shown.
        #[arg(long, default_value_t = 80)]
        width: usize,
    },
    /// Forget the call at POSITION (as `show` prints it), so the next run makes it
    /// again: for an extern that started and never finished, once you have checked
    /// whether it took effect.
    Forget { path: PathBuf, position: String },
}

pub fn run(command: JournalCommand) -> u8 {
    let result = match command {
        JournalCommand::Show { path, width } => journal::read(&path).map(|(meta, rows)| {
            print!("{}", show(&meta, &rows, width));
            exit::OK
        }),
        JournalCommand::Forget { path, position } => {
            journal::forget(&path, &position).map(|found| {
                if found {
                    eprintln!("forgot the call at {position}: the next run makes it again");
                    exit::OK
                } else {
                    eprintln!("error: {} holds no call at {position}", path.display());
                    exit::ERRORS
                }
            })
        }
    };
    result.unwrap_or_else(|e| {
        eprintln!("error: {e}");
        exit::USAGE
    })
}

fn show(meta: &[(String, String)], rows: &[journal::Row], width: usize) -> String {
    let get = |k: &str| {
        meta.iter()
            .find(|(key, _)| key == k)
            .map_or("", |(_, v)| v.as_str())
    };
    let mut out = format!(
        "program {}\nruns: {}; {}\n",
        get("program"),
        get("runs"),
        if get("finished").is_empty() {
            "not finished: the same `sapc run … --journal` resumes it"
        } else {
            "finished"
        }
    );
    let count = |kind: &str| rows.iter().filter(|r| r.kind == kind).count();
    out.push_str(&format!(
        "{} model calls, {} extern calls, {} inputs, {} printed lines\n\n",
        count("llm"),
        count("extern"),
        count("input"),
        count("print")
    ));
    let position_width = rows.iter().map(|r| r.position.len()).max().unwrap_or(0);
    for r in rows {
        let answer = match &r.answer {
            Some(a) => runtime::error::shorten(&a.replace('\n', "⏎"), width),
            None => "STARTED, NEVER FINISHED".to_owned(),
        };
        let path = if r.path.is_empty() {
            String::new()
        } else {
            format!(" [{}]", r.path)
        };
        out.push_str(&format!(
            "{:>position_width$}  {:<6} {} at {}{path}\n{:>position_width$}  → {answer}\n",
            r.position, r.kind, r.name, r.site, ""
        ));
    }
    out
}
