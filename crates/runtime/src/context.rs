//! The context: what the model sees, scoped by the call stack (REFERENCE.md, "Context
//! rules").
//!
//! A context is a chain of frames. A call pushes a frame on top of the caller's context
//! (sharing the caller's frames, not copying them); the callee's injections go into its
//! frame, which disappears when the callee returns. Loop iterations get a frame each.
//! `Context::new()` starts an empty chain.
//!
//! Rendering is byte-stable, outermost frame first. Program literals are instructions and
//! appear verbatim; injected values are data, delimited and labelled with where they came
//! from, so the model can tell the program's instructions from the data it handles.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};

use crate::telemetry::{self, SpanContext};
use crate::value::Value;

/// Where an injected value came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Origin {
    /// The function that injected it.
    pub function: String,
    /// What it is there: a parameter or variable name, or `result of f`.
    pub label: String,
    /// The tool outside the program its data came from, when the run knows it did
    /// (`mcp:inbox/read_mail`) though the value went through the program's own code on
    /// the way: the prompt still says where it was injected, the run treats it as
    /// untrusted.
    pub untrusted: Option<String>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Entry {
    /// A string literal of the program, injected with `"…"!`.
    Instruction(Arc<str>),
    /// A value injected with `value!`.
    Data { value: Value, origin: Origin },
}

#[derive(Debug, Default)]
struct Frame {
    parent: Option<Arc<Frame>>,
    /// The function whose frame this is; `None` for a loop iteration's and the root.
    function: Option<Arc<str>>,
    entries: Mutex<Vec<Entry>>,
    /// The function call's OpenTelemetry span, when spans are exported: it ends when
    /// the frame is dropped (the function returned).
    span: Option<Box<SpanContext>>,
    /// Set by [`Context::keep_next_call`]: the next function entered from this frame
    /// works in it, so what it injects stays (an editor session's turn).
    keep: AtomicBool,
}

thread_local! {
    /// The named frames entered on this thread that may still be open, innermost last
    /// (only while spans are exported): an extern call's span goes under the innermost
    /// one still alive.
    static OPEN: RefCell<Vec<Weak<Frame>>> = const { RefCell::new(Vec::new()) };
}

/// The frames a thread of control has open, kept aside while another runs on its thread
/// (a suspended fan-out task): see [`swap_open`].
#[derive(Default)]
pub struct OpenFrames(Vec<Weak<Frame>>);

/// Exchanges this thread's open frames with `saved` (as [`crate::order::swap`] does with
/// the place in the order).
pub fn swap_open(saved: &mut OpenFrames) {
    OPEN.with(|open| std::mem::swap(&mut *open.borrow_mut(), &mut saved.0));
}

/// The span of the innermost function call with a context still running on this
/// thread, if spans are exported.
pub fn innermost_span() -> Option<SpanContext> {
    OPEN.with(|open| {
        let mut open = open.borrow_mut();
        while let Some(last) = open.last() {
            if let Some(frame) = last.upgrade()
                && let Some(span) = &frame.span
            {
                return Some((**span).clone());
            }
            open.pop();
        }
        None
    })
}

/// A handle on a chain of frames; cloning it shares the frames.
#[derive(Clone, Debug)]
pub struct Context {
    top: Arc<Frame>,
}

impl Default for Context {
    fn default() -> Self {
        Context::new()
    }
}

impl Context {
    /// An empty context (`Context::new()`).
    pub fn new() -> Context {
        Context {
            top: Arc::new(Frame::default()),
        }
    }

    /// A new frame on top of this context, for a callee or a loop iteration. The frames
    /// below are shared, not copied.
    pub fn child(&self) -> Context {
        Context {
            top: Arc::new(Frame {
                parent: Some(self.top.clone()),
                function: None,
                entries: Mutex::default(),
                span: None,
                keep: AtomicBool::new(false),
            }),
        }
    }

    /// A callee's frame on top of this context: like [`Context::child`], named after
    /// the function, so that a call knows its path (traces are trees by it).
    pub fn enter(&self, function: Arc<str>) -> Context {
        if self.top.keep.load(Ordering::Relaxed) && self.top.keep.swap(false, Ordering::AcqRel) {
            return self.clone();
        }
        if telemetry::active() {
            return self.enter_traced(function);
        }
        Context {
            top: Arc::new(Frame {
                parent: Some(self.top.clone()),
                function: Some(function),
                entries: Mutex::default(),
                span: None,
                keep: AtomicBool::new(false),
            }),
        }
    }

    #[cold]
    fn enter_traced(&self, function: Arc<str>) -> Context {
        let parent = self.span();
        let span = telemetry::function_span(&function, parent.as_ref()).map(Box::new);
        let top = Arc::new(Frame {
            parent: Some(self.top.clone()),
            function: Some(function),
            entries: Mutex::default(),
            span,
            keep: AtomicBool::new(false),
        });
        OPEN.with(|open| open.borrow_mut().push(Arc::downgrade(&top)));
        Context { top }
    }

    /// The span of the innermost function call this context belongs to, if spans are
    /// exported: the parent of a model call's span.
    pub fn span(&self) -> Option<SpanContext> {
        let mut frame = Some(&self.top);
        while let Some(f) = frame {
            if let Some(span) = &f.span {
                return Some((**span).clone());
            }
            frame = f.parent.as_ref();
        }
        None
    }

    /// The functions whose frames this context is made of, outermost first: the call
    /// path of the functions that passed the context down (a `Context::new()` starts a
    /// path of its own).
    pub fn call_path(&self) -> Vec<String> {
        let mut path = Vec::new();
        let mut frame = Some(&self.top);
        while let Some(f) = frame {
            if let Some(name) = &f.function {
                path.push(name.to_string());
            }
            frame = f.parent.as_ref();
        }
        path.reverse();
        path
    }

    pub fn inject(&self, entry: Entry) {
        self.top
            .entries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(entry);
    }

    pub fn instruct(&self, text: &str) {
        self.inject(Entry::Instruction(Arc::from(text)));
    }

    pub fn inject_value(&self, value: Value, function: &str, label: &str) {
        self.inject_from(value, function, label, None);
    }

    /// [`Context::inject_value`] of a value that came from `untrusted` (a tool's label).
    pub fn inject_from(&self, value: Value, function: &str, label: &str, untrusted: Option<&str>) {
        self.inject(Entry::Data {
            value,
            origin: Origin {
                function: function.to_owned(),
                label: label.to_owned(),
                untrusted: untrusted.map(str::to_owned),
            },
        });
    }

    /// Makes the next function called with this context work in this context's own
    /// frame instead of a new one: what it injects stays when it returns. A session
    /// that keeps a conversation (`sapc acp`) calls `main` so; the functions `main`
    /// calls get their own frames as always.
    pub fn keep_next_call(&self) {
        self.top.keep.store(true, Ordering::Release);
    }

    /// How many entries the top frame holds.
    pub fn len(&self) -> usize {
        self.top
            .entries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .len()
    }

    /// Whether the top frame holds nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Drops the top frame's entries after the first `len`: what a turn that did not end
    /// added, taken back (an editor's session whose prompt was cancelled).
    pub fn truncate(&self, len: usize) {
        self.top
            .entries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .truncate(len);
    }

    /// How many frames the chain has.
    pub fn depth(&self) -> usize {
        let mut n = 0;
        let mut frame = Some(&self.top);
        while let Some(f) = frame {
            n += 1;
            frame = f.parent.as_ref();
        }
        n
    }

    /// Every entry, outermost frame first.
    pub fn entries(&self) -> Vec<Entry> {
        let mut frames = Vec::new();
        let mut frame = Some(&self.top);
        while let Some(f) = frame {
            frames.push(f);
            frame = f.parent.as_ref();
        }
        let mut out = Vec::new();
        for f in frames.into_iter().rev() {
            out.extend(
                f.entries
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .iter()
                    .cloned(),
            );
        }
        out
    }

    /// Where the first untrusted data this context holds came from — a tool's result,
    /// labelled `mcp:SERVER/TOOL` or `std:MODULE/TOOL` when it was injected — or `None`.
    /// Only asked where a `trusted` parameter or the trace needs it: a program that
    /// reads no tool pays nothing.
    pub fn untrusted_source(&self) -> Option<String> {
        let mut frame = Some(&self.top);
        while let Some(f) = frame {
            let entries = f.entries.lock().unwrap_or_else(|e| e.into_inner());
            for entry in entries.iter() {
                if let Entry::Data { origin, .. } = entry {
                    if is_tool_label(&origin.function) {
                        return Some(origin.function.clone());
                    }
                    if let Some(source) = &origin.untrusted {
                        return Some(source.clone());
                    }
                }
            }
            drop(entries);
            frame = f.parent.as_ref();
        }
        None
    }

    /// The prompt text of this context.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let mut frames = Vec::new();
        let mut frame = Some(&self.top);
        while let Some(f) = frame {
            frames.push(f);
            frame = f.parent.as_ref();
        }
        for f in frames.into_iter().rev() {
            for entry in f.entries.lock().unwrap_or_else(|e| e.into_inner()).iter() {
                render_entry(entry, &mut out);
            }
        }
        out
    }
}

/// Whether an origin label names a tool outside the program (what it returns is
/// untrusted): `mcp:notes/read_text_file`, `std:fs/read`, `python:get_mail`.
pub fn is_tool_label(label: &str) -> bool {
    label.starts_with("mcp:") || label.starts_with("std:") || label.starts_with("python:")
}

fn render_entry(entry: &Entry, out: &mut String) {
    match entry {
        Entry::Instruction(text) => {
            out.push_str(text);
            out.push('\n');
        }
        Entry::Data { value, origin } => {
            out.push_str("<data from=\"");
            push_attr(&origin.function, out);
            out.push_str("\" name=\"");
            push_attr(&origin.label, out);
            out.push_str("\">\n");
            let text = match value {
                Value::Str(s) => s.to_string(),
                other => other.to_json_string(),
            };
            // Data cannot close its own block: `</data` inside it is escaped.
            out.push_str(&text.replace("</data", "<\\/data"));
            out.push_str("\n</data>\n");
        }
    }
}

fn push_attr(text: &str, out: &mut String) {
    for c in text.chars() {
        match c {
            '"' => out.push_str("&quot;"),
            '<' => out.push_str("&lt;"),
            '&' => out.push_str("&amp;"),
            '\n' => out.push(' '),
            c => out.push(c),
        }
    }
}
