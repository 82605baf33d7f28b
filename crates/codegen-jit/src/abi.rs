//! The contract between compiled code and the runtime, as data: the [`Env`] every
//! compiled function receives (its first fields at fixed offsets compiled code reads
//! and writes), the descriptors compiled code passes to intrinsics, and how a native
//! value is passed ([`Word`]). How objects are laid out is `heap.rs`'s; which
//! intrinsics exist is `intrinsics.rs`'s table.
//!
//! The native signature of a sap function is `fn(depth_left, params…) -> (result,
//! failed)`, with the `Env` in the pinned register (r15 on x86-64): how many more nested
//! calls the depth budget allows, and whether the call failed, travel in registers. A
//! trampoline `fn(env, args) -> result` calls it from Rust with the arguments in an
//! array: it sets the pinned register for the call and gives the caller's back.

use ir::{BinOp, Builtin, FuncId, SrcSpan, Type};
use runtime::Value;
use runtime::value::ToolRef;
use serde::{Deserialize, Serialize};

use crate::heap::{ObjRef, Slot};
use crate::host::{ExecError, Host};

/// How an intrinsic's parameter or result is passed: a word in an integer register, or
/// an `f64` in a float register.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Word {
    Int,
    Float,
}

/// The compiled program as the runtime sees it: intrinsics call back into sap functions
/// through it (the plan executor's tools, `parallel for` bodies) without depending on
/// how the program was compiled or loaded.
pub trait Program: Sync {
    /// Calls `f` with `args` on a fresh `Env` under the caller's depth and remaining
    /// iteration budget.
    fn call_function(
        &self,
        host: &Host,
        depth: u64,
        max_iterations: u64,
        f: FuncId,
        args: Vec<Value>,
    ) -> Result<Value, ExecError>;

    /// The address of each pin of the program, by index (what `Env::pins` points at).
    fn pins(&self) -> *const usize;

    /// The address of every intrinsic, by `Intr` (what `Env::intrinsics` points at).
    fn intrinsics(&self) -> *const usize;

    /// Site `index` of the program (see [`Site`]).
    fn site(&self, index: usize) -> Option<&Site>;

    /// The most stack one call of any of its functions takes.
    fn frame_bytes(&self) -> usize;

    /// Runs a `parallel for`'s iterations, adding the iterations they used to `env`'s.
    /// Each element is marked with `origin` (the list's, see `heap::origin`); the
    /// results come with the first origin any of them had.
    fn run_parallel(
        &self,
        host: &Host,
        env: &mut Env<'_>,
        desc: &ParallelDesc,
        captured: &[i64],
        items: &[Value],
        origin: u32,
    ) -> Result<(Vec<Value>, u32), ExecError>;
}

/// What compiled code reads and writes directly, at the `OFFSET_*` offsets, then what
/// only the intrinsics use. One per thread running compiled code.
#[repr(C)]
pub struct Env<'a> {
    /// Nonzero when an error is pending: compiled code checks it after every intrinsic
    /// call (a sap function also returns it).
    pub failed: u64,
    /// The call depth where compiled code hands over to the runtime (entering the
    /// program, a tool the plan executor runs, a `parallel for` body); within compiled
    /// code the budget left travels as a parameter.
    pub depth: u64,
    pub max_depth: u64,
    /// Loop iterations the budget has left (`max_iterations` less those run); in a
    /// function with loops the count lives in a register and is written here around
    /// calls that read or advance it (a store, and a load after).
    pub iterations_left: u64,
    pub max_iterations: u64,
    /// Where a slow path's adapter leaves the intrinsic's result (see `codegen`).
    pub out: i64,
    /// The address of every pin of the running program, by index (see [`Pin`]):
    /// compiled code reads a descriptor or constant as `pins[i]`.
    pub pins: *const usize,
    /// The address of every intrinsic, by `Intr` (`Program::intrinsics`): compiled code
    /// calls an intrinsic as `intrinsics[i]`.
    pub intrinsics: *const usize,
    pub host: &'a Host,
    pub program: &'a dyn Program,
    pub error: Option<ExecError>,
}

pub const OFFSET_FAILED: i32 = std::mem::offset_of!(Env<'static>, failed) as i32;
pub const OFFSET_DEPTH: i32 = std::mem::offset_of!(Env<'static>, depth) as i32;
pub const OFFSET_MAX_DEPTH: i32 = std::mem::offset_of!(Env<'static>, max_depth) as i32;
pub const OFFSET_ITERATIONS_LEFT: i32 = std::mem::offset_of!(Env<'static>, iterations_left) as i32;
pub const OFFSET_OUT: i32 = std::mem::offset_of!(Env<'static>, out) as i32;
pub const OFFSET_PINS: i32 = std::mem::offset_of!(Env<'static>, pins) as i32;
pub const OFFSET_INTRINSICS: i32 = std::mem::offset_of!(Env<'static>, intrinsics) as i32;

impl<'a> Env<'a> {
    pub fn new(host: &'a Host, program: &'a dyn Program) -> Env<'a> {
        Env {
            failed: 0,
            depth: 0,
            max_depth: host.limits.max_depth as u64,
            iterations_left: host.limits.max_loop_iterations,
            max_iterations: host.limits.max_loop_iterations,
            out: 0,
            pins: program.pins(),
            intrinsics: program.intrinsics(),
            host,
            program,
            error: None,
        }
    }

    /// Lowers the depth limit to what the stack this runs on still holds, so that deep
    /// recursion stops with an error rather than overflowing the stack. Called once the
    /// depth is set.
    pub fn fit_stack(&mut self) {
        if let Some(room) = runtime::tasks::stack_room() {
            let frames = (room / self.program.frame_bytes().max(16)) as u64;
            self.max_depth = self.max_depth.min(self.depth.saturating_add(frames));
        }
    }

    /// Loop iterations run on this `Env`.
    pub fn iterations_used(&self) -> u64 {
        self.max_iterations.saturating_sub(self.iterations_left)
    }

    /// Whether the depth limit is the stack's rather than `--max-depth`.
    pub fn depth_is_the_stacks(&self) -> bool {
        self.max_depth < u64::from(self.host.limits.max_depth)
    }

    pub fn fail(&mut self, e: ExecError) {
        if self.error.is_none() {
            self.error = Some(e);
        }
        self.failed = 1;
    }
}

/// Why compiled code stopped, with what it knew.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum FailKind {
    Overflow {
        op: BinOp,
        ty: Type,
    },
    Depth,
    Iterations,
    /// A broken invariant of the code generator, with its message.
    Internal(String),
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct FailDesc {
    pub kind: FailKind,
    pub span: Option<SrcSpan>,
    /// The site of the frame to record on the sap stack as the failure leaves it, when
    /// the code that failed records none itself (a function's shared exit).
    pub frame: Option<u32>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct FrameDesc {
    pub function: String,
    pub span: Option<SrcSpan>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct HostCallDesc {
    pub builtin: Option<Builtin>,
    pub name: String,
    pub args: Vec<Type>,
    pub ret: Type,
    pub span: Option<SrcSpan>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TypeArg {
    pub ty: Type,
    pub span: Option<SrcSpan>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct BinaryDesc {
    pub op: BinOp,
    pub ty: Type,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct StructDesc {
    pub type_id: u32,
    pub fields: Vec<Type>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct InjectDesc {
    pub ty: Type,
    pub function: String,
    pub label: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum LlmKind {
    Produce(Type),
    Decide,
    Fill,
    Choose,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct LlmDesc {
    pub kind: LlmKind,
    pub site: u32,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ParallelDesc {
    pub body: u32,
    pub captures: Vec<Type>,
    pub elem: Type,
    pub result: Type,
    pub span: Option<SrcSpan>,
}

/// A place where compiled code can fail, or a frame a failure unwinds through. Code
/// passes a site's index (`Program::site`) to `sap_fail` and `sap_unwind`: sites are
/// read only when a run fails, so a program from the build cache decodes them then.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Site {
    Fail(FailDesc),
    Frame(FrameDesc),
}

/// A program's sites, by index: decoded, or encoded until a run first needs one.
pub struct Sites {
    encoded: Vec<u8>,
    decoded: std::sync::OnceLock<Vec<Site>>,
}

impl Sites {
    pub fn decoded(sites: Vec<Site>) -> Sites {
        Sites {
            encoded: Vec::new(),
            decoded: sites.into(),
        }
    }

    /// Sites encoded as `native_module` stores them ([postcard]).
    pub fn encoded(encoded: Vec<u8>) -> Sites {
        Sites {
            encoded,
            decoded: std::sync::OnceLock::new(),
        }
    }

    /// Site `index`; `None` for an index the program does not have, or encoded sites
    /// that do not decode (a file the checksum passed, so not expected).
    pub fn get(&self, index: usize) -> Option<&Site> {
        self.decoded
            .get_or_init(|| postcard::from_bytes(&self.encoded).unwrap_or_default())
            .get(index)
    }
}

/// What compiled code points at, as data: a descriptor it passes to an intrinsic, or a
/// constant object it loads. The code reads pin `i`'s address from the table
/// `Env::pins` of the program that runs it, made when the program is loaded
/// ([`Pins`]): no address is baked into the code, so the same machine code runs in this
/// process or, read from the build cache, in another, with nothing to patch.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Pin {
    HostCall(HostCallDesc),
    TypeArg(TypeArg),
    Binary(BinaryDesc),
    Struct(StructDesc),
    Inject(InjectDesc),
    Llm(LlmDesc),
    Parallel(ParallelDesc),
    /// A constant string.
    Str(String),
    /// A constant tool: the function (or extern) a program names as a value.
    Tool {
        name: String,
        function: Option<u32>,
    },
}

/// The pins made for one loaded program: the descriptors where they are (in the list
/// they came in, which is never changed afterwards) and each constant an object holding
/// one count, and the table of their addresses. They must live as long as the code.
pub struct Pins {
    /// Held only to keep the descriptors where the addresses point.
    _pins: Vec<Pin>,
    /// Held only to keep the constants alive.
    _objects: Vec<ObjRef>,
    pub addresses: Vec<usize>,
}

impl Pins {
    pub fn make(pins: Vec<Pin>) -> Pins {
        fn at<T>(b: &T) -> usize {
            b as *const T as usize
        }
        let mut objects = Vec::new();
        let mut object = |slot: Slot| {
            let o = ObjRef::new(slot);
            let word = o.word() as usize;
            objects.push(o);
            word
        };
        let addresses = pins
            .iter()
            .map(|pin| match pin {
                Pin::HostCall(d) => at(d),
                Pin::TypeArg(d) => at(d),
                Pin::Binary(d) => at(d),
                Pin::Struct(d) => at(d),
                Pin::Inject(d) => at(d),
                Pin::Llm(d) => at(d),
                Pin::Parallel(d) => at(d),
                Pin::Str(s) => object(Slot::Val(Value::str(s))),
                Pin::Tool { name, function } => object(Slot::Val(Value::Tool(ToolRef {
                    name: name.as_str().into(),
                    function: *function,
                }))),
            })
            .collect();
        Pins {
            _pins: pins,
            _objects: objects,
            addresses,
        }
    }
}
