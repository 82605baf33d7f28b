//! The salsa database. One writer (the CLI or the language server's main loop) owns it;
//! readers get clones, which share the memo tables.

use std::sync::{Arc, Mutex};

use salsa::Setter;

use crate::Db;
use crate::items::{SourceFile, Workspace};

#[salsa::db]
#[derive(Clone)]
pub struct Database {
    storage: salsa::Storage<Self>,
    /// Names of the queries executed since the last `take_executed`, when logging is on.
    executed: Option<Arc<Mutex<Vec<String>>>>,
    workspace: Option<Workspace>,
}

impl Default for Database {
    fn default() -> Database {
        Database::new(salsa::Storage::new(None), None)
    }
}

impl Database {
    /// A database that records every query execution, for incrementality tests.
    pub fn with_execution_log() -> Database {
        let log: Arc<Mutex<Vec<String>>> = Arc::default();
        let sink = log.clone();
        let storage = salsa::Storage::new(Some(Box::new(move |event: salsa::Event| {
            if let salsa::EventKind::WillExecute { database_key } = event.kind {
                sink.lock().unwrap().push(format!("{database_key:?}"));
            }
        })));
        Database::new(storage, Some(log))
    }

    fn new(storage: salsa::Storage<Self>, executed: Option<Arc<Mutex<Vec<String>>>>) -> Database {
        let mut db = Database {
            storage,
            executed,
            workspace: None,
        };
        db.workspace = Some(Workspace::new(&db, Vec::new()));
        db
    }

    /// Adds a file to the workspace.
    pub fn add_file(&mut self, path: impl Into<String>, text: impl Into<String>) -> SourceFile {
        let file = SourceFile::new(self, path.into(), text.into());
        let workspace = self.workspace();
        let mut files = workspace.files(self).clone();
        files.push(file);
        workspace.set_files(self).to(files);
        file
    }

    /// Adds the prelude modules (`aot`, …) that ship with the compiler; a program's own
    /// module of the same name, added later, takes precedence.
    pub fn add_prelude(&mut self) -> Vec<SourceFile> {
        crate::PRELUDE
            .iter()
            .map(|(name, text)| self.add_file(crate::prelude_path(name), *text))
            .collect()
    }

    /// Replaces the text of a file.
    pub fn set_text(&mut self, file: SourceFile, text: impl Into<String>) {
        file.set_text(self).to(text.into());
    }

    /// The queries executed since the last call, as `query_name(Id(..))`.
    pub fn take_executed(&self) -> Vec<String> {
        match &self.executed {
            Some(log) => std::mem::take(&mut *log.lock().unwrap()),
            None => Vec::new(),
        }
    }
}

#[salsa::db]
impl salsa::Database for Database {}

#[salsa::db]
impl Db for Database {
    fn workspace(&self) -> Workspace {
        self.workspace
            .expect("the workspace is created with the database")
    }
}
