//! What the run's client (an editor speaking ACP) offers the standard tools: a user to
//! ask when a call is outside the grants, and the editor's own files.

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;

/// A future a client answers with.
pub type Answering<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What a standard tool call would touch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Access {
    /// A file or folder to read (canonical).
    Read(PathBuf),
    /// A file to write (its folder canonical).
    Write(PathBuf),
    Net {
        host: String,
        port: Option<u16>,
    },
    /// A program, as the program names it.
    Run(String),
}

/// A standard tool call the grants refuse, put to the client.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Permission {
    /// The tool (`fs::read`).
    pub tool: String,
    pub access: Access,
    /// What allowing it always (for the rest of the session) grants: the target's
    /// folder, its host, or the program.
    pub scope: String,
    /// The error the call fails with when it is refused; it names the flag to add.
    pub refusal: String,
}

impl Permission {
    pub fn new(tool: &str, access: Access, scope: String, refusal: String) -> Permission {
        Permission {
            tool: tool.to_owned(),
            access,
            scope,
            refusal,
        }
    }

    /// The path it touches (empty for a host or a program).
    pub fn path(self) -> PathBuf {
        match self.access {
            Access::Read(path) | Access::Write(path) => path,
            Access::Net { .. } | Access::Run(_) => PathBuf::new(),
        }
    }

    /// What it does, for a person: `read /src/a.rs`, `connect to example.com:443`.
    pub fn describe(&self) -> String {
        match &self.access {
            Access::Read(path) => format!("read {}", path.display()),
            Access::Write(path) => format!("write {}", path.display()),
            Access::Net {
                host,
                port: Some(port),
            } => format!("connect to {host}:{port}"),
            Access::Net { host, port: None } => format!("connect to {host}"),
            Access::Run(program) => format!("run {program}"),
        }
    }
}

/// The user's answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    Once,
    /// For the rest of the session: the client remembers the permission's scope.
    Always,
    Reject,
}

/// A run's client. Nothing is done before the answer to [`Client::ask`] comes.
pub trait Client: Send + Sync {
    fn ask(&self, permission: Permission) -> Answering<'_, Answer>;
    /// Whether `fs::read` goes through [`Client::read_text`].
    fn reads_files(&self) -> bool {
        false
    }
    fn read_text(&self, path: PathBuf) -> Answering<'_, Result<String, String>> {
        Box::pin(async move { Err(format!("the client does not read {}", path.display())) })
    }
    /// Whether `fs::write` goes through [`Client::write_text`].
    fn writes_files(&self) -> bool {
        false
    }
    fn write_text(&self, path: PathBuf, _content: String) -> Answering<'_, Result<(), String>> {
        Box::pin(async move { Err(format!("the client does not write {}", path.display())) })
    }
}
