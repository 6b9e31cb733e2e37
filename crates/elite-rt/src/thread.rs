//! The user's view of ULTs, mirroring `std::thread`: `spawn`, `Builder`, `JoinHandle`, `current`,
//! `yield_now`, `sleep`.

use crate::atomics::Ordering;
use crate::processor::{Inline, Processor};
use crate::slot::current_processor;
use crate::stack::{round_to_pages, MAX_STACK_SIZE, MIN_STACK_SIZE};
use crate::switch::{park_ult, suspend, Deadline, Switch};
use crate::tcb::{new_task, JoinState, Life, TcbRef, Waiter};
use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What a spawn asks for besides the closure.
#[derive(Default, Clone)]
pub(crate) struct UltSpec {
    name: Option<Arc<str>>,
    stack_size: Option<usize>,
    /// Bytes of data declared for the cache-affinity estimator (`Builder::footprint`).
    pub(crate) footprint: Option<usize>,
    /// Never leaves the processor it starts on (`Builder::pinned`).
    pub(crate) pinned: bool,
    /// The data block declared for prefetching (`Builder::data`).
    pub(crate) data: Option<crate::prefetch::DataBlock>,
    /// Its place and home (`Builder::place`, `Builder::home`), resolved.
    pub(crate) place: Option<crate::policy::places::PlaceReq>,
    /// Its group's number in the runtime (`Builder::group`; 0: none); `None`: the spawner's.
    pub(crate) group: Option<u16>,
}

impl UltSpec {
    pub(crate) fn named(name: &str) -> UltSpec {
        UltSpec { name: Some(Arc::from(name)), ..UltSpec::default() }
    }

    pub(crate) fn with_default_stack(mut self, size: usize) -> UltSpec {
        self.stack_size.get_or_insert(size);
        self
    }
}

/// Fills a free TCB for a new ULT. The caller then publishes it on a start-queue. Inline: on
/// its own it takes the spec by memory, which every spawn would then write out and read back.
#[inline]
pub(crate) fn init_tcb<F, T>(
    t: TcbRef,
    spec: UltSpec,
    id: u64,
    processor: usize,
    engine: &crate::policy::engine::Engine,
    f: F,
) where
    F: FnOnce() -> T + Send,
    T: Send,
{
    let tcb = t.tcb();
    let (task, vtable) = new_task(f, tcb.inline.get());
    tcb.head.id.set(id);
    crate::prefetch::UltBlock::on_spawn(t, spec.data, engine);
    if spec.name.is_some() {
        tcb.head.named.set(true);
        // SAFETY: the TCB is free and not yet published: the spawner owns every field. (A free
        // TCB's name is `None`: `Tcb::reset` clears it.)
        unsafe { *tcb.links.name.get() = spec.name };
    }
    // Validated: at most MAX_STACK_SIZE (1 GiB), which fits.
    tcb.head.stack_size.set(spec.stack_size.unwrap_or(crate::stack::DEFAULT_STACK_SIZE) as u32);
    tcb.head.task.set(task);
    tcb.head.vtable.set(vtable);
    tcb.head.pinned.set(spec.pinned);
    tcb.head.set_group(spec.group.unwrap_or(0));
    // (`spawn_on` and `spawn_outside` set it, and the rule, for a placed ULT.)
    tcb.head.placed.set(false);
    // `join` is already 0: free TCBs are reset by `recycle` (or fresh).
    tcb.head.life.set(Life::Queued);
    tcb.head.processor.store(processor, Ordering::Relaxed);
}

/// Spawns on the processor running the caller.
#[inline]
pub(crate) fn spawn_on<F, T>(p: &Processor, spec: UltSpec, f: F) -> JoinHandle<T>
where
    F: FnOnce() -> T + Send,
    T: Send,
{
    let t = p.alloc_tcb();
    p.shared.engine.on_spawn(t, spec.footprint);
    let (pinned, place) = (spec.pinned, spec.place);
    // The spawner's group, unless the builder named one (`Builder::group`).
    let spec = match spec.group {
        Some(_) => spec,
        None => UltSpec { group: Some(p.current_ult().map_or(0, |me| me.tcb().head.group.get())), ..spec },
    };
    init_tcb(t, spec, p.next_id(), p.index, &p.shared.engine, f);
    p.trace_spawn(t);
    p.remote().stats.spawns.bump();
    p.remote().handles.bump();
    if pinned || place.is_some() || p.shared.places.spawn_rules {
        // A pin, a place, a home, or a runtime-wide rule: the places decide (`policy::places`).
        p.spawn_placed(t, pinned, place);
    } else {
        p.push_start(t);
    }
    JoinHandle::new(t)
}

/// Spawns a new ULT on the runtime running the caller and returns a handle to join it.
///
/// # Panics
///
/// Panics when called outside a ULT (use [`Runtime::spawn`](crate::Runtime::spawn) or
/// [`Runtime::block_on`](crate::Runtime::block_on) there), or when the runtime cannot get stacks
/// any more ([`Builder::spawn`] returns that as an error instead). Inside a
/// [`blocking`](crate::blocking) call it spawns on the runtime of the ULT that made the call.
///
/// ```
/// let rt = elite_rt::Runtime::builder().processors(1).build().unwrap();
/// let v = rt.block_on(|| elite_rt::spawn(|| 6 * 7).join().unwrap());
/// assert_eq!(v, 42);
/// ```
pub fn spawn<F, T>(f: F) -> JoinHandle<T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let spawned = match current_processor() {
        Some(p) => {
            let spec = UltSpec { stack_size: Some(p.shared.config.stack_size), ..UltSpec::default() };
            spawn_checked(p, spec, f)
        }
        None => spawn_in_call(|s| UltSpec::default().with_default_stack(s.config.stack_size), f),
    };
    spawned.unwrap_or_else(|e| panic!("elite_rt::spawn failed: {e}"))
}

/// Spawns on `p` unless the runtime is shutting down or short of stacks.
#[inline]
fn spawn_checked<F, T>(p: &Processor, spec: UltSpec, f: F) -> Result<JoinHandle<T>, SpawnError>
where
    F: FnOnce() -> T + Send,
    T: Send,
{
    if p.shared.is_shutting_down() {
        return Err(SpawnError::ShuttingDown);
    }
    if spec.pinned && p.shared.config.central {
        return Err(SpawnError::Unsupported {
            what: "a pinned ULT on a central runtime (RuntimeBuilder::central keeps no per-processor runqueue to pin it to)",
        });
    }
    if p.shared.stacks_exhausted.load(Ordering::Relaxed) {
        return Err(SpawnError::Stack {
            size: spec.stack_size.unwrap_or(0),
            error: "an earlier stack allocation failed and no stack has been freed since".into(),
        });
    }
    Ok(spawn_on(p, spec, f))
}

/// Spawns from inside a blocking call (`crate::blocking`), on the runtime of the ULT that made
/// it, as from outside that runtime; `NoRuntime` on any other thread.
fn spawn_in_call<F, T>(
    spec: impl FnOnce(&crate::runtime::Shared) -> UltSpec,
    f: F,
) -> Result<JoinHandle<T>, SpawnError>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let Some(shared) = crate::blocking::calling_runtime() else {
        return Err(SpawnError::NoRuntime);
    };
    if shared.is_shutting_down() {
        return Err(SpawnError::ShuttingDown);
    }
    Ok(shared.spawn_outside(spec(shared), f))
}

/// Configures a ULT before spawning it, like `std::thread::Builder`.
///
/// ```
/// let rt = elite_rt::Runtime::builder().processors(1).build().unwrap();
/// let name = rt.block_on(|| {
///     elite_rt::Builder::new()
///         .name("worker".into())
///         .stack_size(32 * 1024)
///         .spawn(|| elite_rt::current().name().map(str::to_owned))
///         .unwrap()
///         .join()
///         .unwrap()
/// });
/// assert_eq!(name.as_deref(), Some("worker"));
/// ```
#[derive(Default, Debug)]
pub struct Builder {
    name: Option<String>,
    stack_size: Option<usize>,
    footprint: Option<usize>,
    pinned: bool,
    data: Option<crate::prefetch::DataBlock>,
    place: Option<crate::Place>,
    place_mode: crate::PlaceMode,
    home: Option<crate::Place>,
    group: Option<crate::Group>,
}

impl Builder {
    /// A builder with the runtime's defaults.
    pub fn new() -> Builder {
        Builder::default()
    }

    /// Names the ULT (shown by [`Thread::name`] and in diagnostics).
    pub fn name(mut self, name: String) -> Builder {
        self.name = Some(name);
        self
    }

    /// Stack size in bytes, `8 KiB..=1 GiB`; sizes other than the runtime's default are not pooled.
    pub fn stack_size(mut self, bytes: usize) -> Builder {
        self.stack_size = Some(bytes);
        self
    }

    /// Declares the bytes of data the ULT works on between synchronizations (default: none), for
    /// the cache-affinity policies: on a machine without a hardware cache-miss counter the
    /// runtime estimates the misses of each run from it (see [`set_footprint`](crate::set_footprint),
    /// which changes it later from inside the ULT). Policies that need no misses ignore it.
    ///
    /// ```
    /// use elite_rt::policy::Policy;
    /// let rt = elite_rt::Runtime::builder().processors(1).policy(Policy::reload_transient()).build()?;
    /// let sum = rt.block_on(|| {
    ///     let data = vec![1u64; 8192];
    ///     elite_rt::Builder::new()
    ///         .footprint(64 << 10)
    ///         .spawn(move || data.iter().sum::<u64>())
    ///         .unwrap()
    ///         .join()
    ///         .unwrap()
    /// });
    /// assert_eq!(sum, 8192);
    /// # Ok::<(), elite_rt::BuildError>(())
    /// ```
    pub fn footprint(mut self, bytes: usize) -> Builder {
        self.footprint = Some(bytes);
        self
    }

    /// Declares the ULT's data block (default: none): the memory it mostly works on, which the
    /// runtime prefetches one run before the ULT's, while that pays (ELiTE 2.3.5; see
    /// [`RuntimeBuilder::prefetch`](crate::RuntimeBuilder::prefetch) and
    /// [`set_data_block`](crate::set_data_block), which changes it later from inside the ULT).
    /// Only the range is kept: the runtime never reads or writes through it, so any range is safe.
    ///
    /// ```
    /// use std::sync::Arc;
    ///
    /// let rt = elite_rt::Runtime::builder().processors(1).build()?;
    /// let sum = rt.block_on(|| {
    ///     let data: Arc<[u64]> = vec![1u64; 512].into();
    ///     let mine = data.clone();
    ///     elite_rt::Builder::new()
    ///         .data(&data[..])
    ///         .spawn(move || mine.iter().sum::<u64>())
    ///         .unwrap()
    ///         .join()
    ///         .unwrap()
    /// });
    /// assert_eq!(sum, 512);
    /// # Ok::<(), elite_rt::BuildError>(())
    /// ```
    pub fn data(mut self, block: impl Into<crate::prefetch::DataBlock>) -> Builder {
        self.data = Some(block.into());
        self
    }

    /// Pins the ULT (default: not pinned): it starts on the processor of the ULT that spawns it
    /// and never leaves that processor's OS thread. Thieves do not take it, and every wake-up
    /// brings it back to that processor whatever the [policy](crate::policy) or the chaos mode
    /// ([`RuntimeBuilder::chaos`](crate::RuntimeBuilder::chaos)) would choose. For ULTs that keep
    /// OS-thread-bound state across switches (a `thread_local!`, a handle that must be used
    /// from the thread that made it); they give up load balancing, so pin only those.
    ///
    /// Spawned from outside the runtime ([`Builder::spawn_on`] on an OS thread), a pinned ULT
    /// starts on whichever processor takes it first and stays there. A runtime built with
    /// [`RuntimeBuilder::central`](crate::RuntimeBuilder::central) has no per-processor runqueue
    /// to pin to: the spawn returns [`SpawnError::Unsupported`].
    ///
    /// A [`blocking`](crate::blocking) call normally hands its processor to a spare OS thread
    /// while it runs; on a processor where a pinned ULT lives (started and not exited) it does
    /// not: the call runs on the processor's own thread, the processor out of service
    /// meanwhile (counted in [`BlockingStats::pinned_inline`](crate::BlockingStats::pinned_inline)), so
    /// that the pinned ULT never sees another OS thread.
    ///
    /// ```
    /// let rt = elite_rt::Runtime::builder().processors(2).build()?;
    /// let same = rt.block_on(|| {
    ///     elite_rt::Builder::new()
    ///         .pinned(true)
    ///         .spawn(|| {
    ///             let first = std::thread::current().id();
    ///             (0..100).all(|_| {
    ///                 elite_rt::yield_now();
    ///                 std::thread::current().id() == first
    ///             })
    ///         })
    ///         .unwrap()
    ///         .join()
    ///         .unwrap()
    /// });
    /// assert!(same);
    /// # Ok::<(), elite_rt::BuildError>(())
    /// ```
    pub fn pinned(mut self, pinned: bool) -> Builder {
        self.pinned = pinned;
        self
    }

    /// A locality hint (LASSI): the ULT starts on a processor of `place` (the spawner, if it is
    /// one; else the place's processors in turn) and, when woken, goes to the processor of the
    /// place it last ran on (or its home in the place), unless that one is overloaded; see
    /// [`place_mode`](Self::place_mode) for whether thieves elsewhere may take it. The place is
    /// checked at the spawn: one the runtime does not have is [`SpawnError::Place`].
    ///
    /// ```
    /// use elite_rt::Place;
    /// let rt = elite_rt::Runtime::builder().topology("2 nodes x 1 core").build()?;
    /// let v = rt.block_on(|| elite_rt::Builder::new().place(Place::node(1)).spawn(|| 6 * 7).unwrap().join());
    /// assert_eq!(v.unwrap(), 42);
    /// let err = rt.block_on(|| elite_rt::Builder::new().place(Place::node(2)).spawn(|| ()).unwrap_err());
    /// assert_eq!(err.to_string(), "invalid place: there is no node 2: the runtime has nodes 0..2");
    /// # Ok::<(), elite_rt::BuildError>(())
    /// ```
    pub fn place(mut self, place: crate::Place) -> Builder {
        self.place = Some(place);
        self
    }

    /// How firmly the ULT keeps to its [`place`](Self::place): a hint thieves may override
    /// ([`PlaceMode::Hint`](crate::PlaceMode::Hint), the default) or a strict set
    /// ([`PlaceMode::Strict`](crate::PlaceMode::Strict)). Without a place it does nothing.
    ///
    /// ```
    /// use elite_rt::{Place, PlaceMode};
    /// let rt = elite_rt::Runtime::builder().processors(2).build()?;
    /// let stayed = rt.block_on(|| {
    ///     elite_rt::Builder::new()
    ///         .place(Place::processor(1))
    ///         .place_mode(PlaceMode::Strict)
    ///         .spawn(|| (0..100).all(|_| {
    ///             elite_rt::yield_now();
    ///             elite_rt::current().processor() == 1
    ///         }))
    ///         .unwrap()
    ///         .join()
    /// });
    /// assert!(stayed.unwrap());
    /// # Ok::<(), elite_rt::BuildError>(())
    /// ```
    pub fn place_mode(mut self, mode: crate::PlaceMode) -> Builder {
        self.place_mode = mode;
        self
    }

    /// Soft pinning (CAF) to a home in `place`: the ULT's home is a processor of `place` (the
    /// one it starts on, when it has no [`place`](Self::place)); a woken ULT goes home unless
    /// home is overloaded, and a ULT a thief took goes back home at its next wake-up. Without a
    /// place, a ULT woken by the ULT that woke it last goes where that ULT runs instead (the
    /// partner rule of [`RuntimeBuilder::soft_pinning`](crate::RuntimeBuilder::soft_pinning)).
    /// [`RuntimeBuilder::soft_pinning`](crate::RuntimeBuilder::soft_pinning) gives every ULT a
    /// home, the processor it ran on before its first wake-up.
    pub fn home(mut self, place: crate::Place) -> Builder {
        self.home = Some(place);
        self
    }

    /// Puts the ULT in `group` (default: the group of the ULT that spawns it, none when
    /// spawned from outside the runtime). See [`Group`](crate::Group).
    ///
    /// ```
    /// use elite_rt::{Builder, Group};
    ///
    /// let rt = elite_rt::Runtime::builder().processors(1).build()?;
    /// let solver = Group::new("solver");
    /// let h = Builder::new().group(&solver).spawn_on(&rt, || elite_rt::current().group())?;
    /// assert_eq!(h.join().unwrap(), Some(solver));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn group(mut self, group: &crate::Group) -> Builder {
        self.group = Some(group.clone());
        self
    }

    /// Spawns the ULT on the runtime running the caller.
    pub fn spawn<F, T>(self, f: F) -> Result<JoinHandle<T>, SpawnError>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let Some(p) = current_processor() else {
            let Some(shared) = crate::blocking::calling_runtime() else {
                return Err(SpawnError::NoRuntime);
            };
            let spec = self.spec(shared)?;
            return spawn_in_call(|_| spec, f);
        };
        let spec = self.spec(&p.shared)?;
        spawn_checked(p, spec, f)
    }

    /// Spawns on `rt` from any thread.
    pub fn spawn_on<F, T>(self, rt: &crate::Runtime, f: F) -> Result<JoinHandle<T>, SpawnError>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let spec = self.spec(rt.shared())?;
        if spec.pinned && rt.shared().config.central {
            return Err(SpawnError::Unsupported {
                what: "a pinned ULT on a central runtime (RuntimeBuilder::central keeps no per-processor runqueue to pin it to)",
            });
        }
        Ok(rt.spawn_spec(spec, f))
    }

    fn spec(self, shared: &crate::runtime::Shared) -> Result<UltSpec, SpawnError> {
        let default_stack = shared.config.stack_size;
        let place = match (self.place, self.home) {
            (None, None) => None,
            (place, home) => {
                let topology = &shared.config.topology;
                let resolve = |p: Option<crate::Place>| match p {
                    Some(p) => shared.places.resolve(&p, topology).map_err(SpawnError::Place),
                    None => Ok(crate::policy::places::NONE),
                };
                let req = crate::policy::places::PlaceReq {
                    place: resolve(place)?,
                    home: resolve(home)?,
                    strict: place.is_some() && self.place_mode == crate::PlaceMode::Strict,
                };
                if req.strict && !shared.places.can_be_strict(req.place) {
                    return Err(SpawnError::Unsupported { what: NARROW_STRICT });
                }
                // (Checked, but with one processor no place changes where it runs:
                // `policy::places`, "Rules".)
                (!shared.places.inert).then_some(req)
            }
        };
        if self.pinned && !shared.places.can_pin() {
            return Err(SpawnError::Unsupported {
                what: "a pinned ULT on work-stealing places (RuntimeBuilder::place_level: its processor shares its runqueue)",
            });
        }
        let size = match self.stack_size {
            Some(s) if !(MIN_STACK_SIZE..=MAX_STACK_SIZE).contains(&s) => {
                return Err(SpawnError::InvalidStackSize {
                    requested: s,
                    min: MIN_STACK_SIZE,
                    max: MAX_STACK_SIZE,
                })
            }
            Some(s) => round_to_pages(s),
            None => default_stack,
        };
        let group = match &self.group {
            Some(g) => Some(shared.groups.number(g).map_err(|_| SpawnError::Unsupported {
                what: "a ULT in a new group: the runtime already numbers the most groups it can (elite_rt::group::MAX_GROUPS)",
            })?),
            None => None,
        };
        Ok(UltSpec {
            name: self.name.map(Arc::from),
            stack_size: Some(size),
            footprint: self.footprint,
            pinned: self.pinned,
            data: self.data,
            place,
            group,
        })
    }
}

/// [`SpawnError::Unsupported`]'s words for a strict place that is not made of whole
/// work-stealing places.
const NARROW_STRICT: &str = "a strict place that splits a work-stealing place (RuntimeBuilder::place_level): \
    its processors share a runqueue with processors outside it; give a hint, or a place of whole work-stealing places";

/// Why a ULT could not be spawned (or, for [`SpawnError::Stack`], started).
///
/// When a processor cannot get a stack for a ULT that is about to run for the first time, the ULT
/// does not run and its [`JoinHandle::join`] returns `Err` with this error as payload (downcast it
/// with `payload.downcast_ref::<SpawnError>()`); spawns fail fast with the same error until a stack
/// is freed again.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SpawnError {
    /// Called outside a ULT: there is no runtime to spawn on.
    NoRuntime,
    /// The runtime is shutting down.
    ShuttingDown,
    /// The requested stack size is out of range.
    InvalidStackSize {
        /// Bytes asked for.
        requested: usize,
        /// Smallest allowed.
        min: usize,
        /// Largest allowed.
        max: usize,
    },
    /// The runtime cannot give the ULT what the builder asked for.
    Unsupported {
        /// What was asked for, and why it cannot be had.
        what: &'static str,
    },
    /// The place asked for ([`Builder::place`], [`Builder::home`], [`spawn_at`](crate::spawn_at))
    /// is not one of the runtime's.
    Place(crate::PlaceError),
    /// No stack could be allocated.
    Stack {
        /// Bytes of the stack that was needed.
        size: usize,
        /// What the system said.
        error: String,
    },
}

impl fmt::Display for SpawnError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SpawnError::NoRuntime => f.write_str(
                "not inside an elite runtime: call this from a ULT (inside Runtime::block_on), or use Runtime::spawn",
            ),
            SpawnError::ShuttingDown => f.write_str("the runtime is shutting down"),
            SpawnError::InvalidStackSize { requested, min, max } => {
                write!(f, "invalid `stack_size`: {requested} bytes is out of range, expected {min}..={max}")
            }
            SpawnError::Unsupported { what } => write!(f, "not supported: {what}"),
            SpawnError::Place(e) => write!(f, "invalid place: {e}"),
            SpawnError::Stack { size, error } => write!(
                f,
                "could not allocate a {size}-byte ULT stack ({error}); each guarded stack costs two kernel \
                 mappings (see vm.max_map_count): keep fewer ULTs alive, use smaller stacks, or opt into \
                 RuntimeBuilder::unguarded_stacks"
            ),
        }
    }
}

impl std::error::Error for SpawnError {}

/// An owned permission to join a ULT: `join` waits for it and returns its result. Dropping the
/// handle detaches the ULT.
///
/// ```
/// let rt = elite_rt::Runtime::builder().processors(1).build()?;
/// let handle = rt.spawn(|| 6 * 7);
/// assert_eq!(handle.join().unwrap(), 42); // joined from an OS thread: it parks
/// rt.block_on(|| {
///     let handle = elite_rt::spawn(|| panic!("a ULT's panic"));
///     assert!(handle.join().is_err()); // the panic arrives as `Err(payload)`
/// });
/// # Ok::<(), elite_rt::BuildError>(())
/// ```
pub struct JoinHandle<T> {
    tcb: TcbRef,
    _result: PhantomData<fn() -> T>,
}

// SAFETY: the handle only reaches the TCB through the join protocol, which is thread-safe, and the
// result type is Send (required at spawn).
unsafe impl<T: Send> Send for JoinHandle<T> {}
// SAFETY: `&JoinHandle` allows only `thread()` and `is_finished()`, which read immutable or atomic fields.
unsafe impl<T: Send> Sync for JoinHandle<T> {}

impl<T> JoinHandle<T> {
    pub(crate) fn new(tcb: TcbRef) -> JoinHandle<T> {
        JoinHandle { tcb, _result: PhantomData }
    }

    /// Waits for the ULT to finish and returns its value, or `Err(payload)` if it panicked (or, with
    /// a [`Cancelled`](crate::Cancelled) or [`SpawnError`] payload, never ran to the end).
    ///
    /// Blocks the calling ULT (its processor runs others meanwhile), or parks the calling OS thread
    /// when called from outside the runtime.
    pub fn join(self) -> std::thread::Result<T> {
        let t = self.tcb;
        let tcb = t.tcb();
        let mut here = current_processor();
        if !tcb.head.join.is_complete() {
            if let Some(p) = here {
                // Not while unwinding: the child would run on this stack, on this OS thread, whose
                // panic count is ours (`crate::anchor`).
                if p.shared.is_own(t) && !std::thread::panicking() && p.start_inline(t) == Inline::Finished {
                    // SAFETY: the child finished inside `start_inline`; this handle is the only
                    // way to it and is consumed here (see `Inline::Finished`).
                    let out = unsafe { self.take_output() };
                    std::mem::forget(self);
                    p.reclaim_inline(t);
                    return out;
                }
            }
            if !tcb.head.join.is_complete() {
                wait_for_exit(t);
                // Blocking may have moved this ULT to another OS thread: look it up again.
                here = current_processor();
            }
        }
        // SAFETY: COMPLETE was observed with Acquire and the handle is the only reader of the output.
        let out = unsafe { self.take_output() };
        std::mem::forget(self); // released here instead of in Drop, and without its RMW:
                                // SAFETY: COMPLETE was observed with Acquire, so the exiter is done with the join state.
        unsafe { let_go(t, here, Finish::Joined) }; // the clean-up note
        out
    }

    /// `join` from an OS thread that is not a processor, waking every `period` to call
    /// `give_up`; when that returns true before the ULT finished, the handle is dropped (the ULT
    /// detached) and `None` returned. (The deadlock watch of `block_on`, `crate::deadlock`.)
    pub(crate) fn join_watched(
        self,
        period: Duration,
        mut give_up: impl FnMut() -> bool,
    ) -> Option<std::thread::Result<T>> {
        let t = self.tcb;
        let tcb = t.tcb();
        if !tcb.head.join.is_complete() {
            // As in `wait_for_exit` for an OS thread.
            // SAFETY: the waiter field is written only before WAITER is set, by this single joiner.
            unsafe { *tcb.links.waiter.get() = Waiter::Thread(std::thread::current()) };
            if tcb.head.join.register_waiter() & JoinState::COMPLETE != 0 {
                // SAFETY: the exiter did not see WAITER: the field is still ours.
                unsafe { *tcb.links.waiter.get() = Waiter::None };
            } else {
                let _counted = crate::deadlock::OsWait::enter(false);
                while !tcb.head.join.is_complete() {
                    std::thread::park_timeout(period);
                    if !tcb.head.join.is_complete() && give_up() {
                        // Detach: the exiter saw WAITER and will unpark this thread once, in vain.
                        drop(self);
                        return None;
                    }
                }
            }
        }
        // SAFETY: COMPLETE was observed with Acquire and the handle is the only reader of the output.
        let out = unsafe { self.take_output() };
        std::mem::forget(self);
        // SAFETY: as above; not on a processor.
        unsafe { let_go(t, None, Finish::Joined) };
        Some(out)
    }

    /// Moves the finished ULT's outcome out of its task.
    ///
    /// # Safety
    /// The ULT is complete and visible as such to the caller, who is the only reader of the output.
    unsafe fn take_output(&self) -> std::thread::Result<T> {
        let tcb = self.tcb.tcb();
        let (task, inline) = (tcb.head.task.get(), tcb.inline.get().cast::<()>());
        // A task stored inline (most) is read at the address of the TCB's inline line, the same
        // as `task` then, but known without it: the branch is predicted, so the read of that
        // line need not wait for the head's line that holds `task` (both are far in memory when
        // many ULTs were joined late).
        // SAFETY: per the contract; the task was made for this handle's `T`.
        let out = unsafe {
            if task == inline {
                crate::tcb::take_output::<T>(inline)
            } else {
                crate::tcb::take_output::<T>(task)
            }
        };
        out.unwrap_or_else(|| Err(Box::new(crate::Cancelled)))
    }

    /// Whether the ULT has finished (a later `join` will not block).
    pub fn is_finished(&self) -> bool {
        self.tcb.tcb().head.join.is_complete()
    }

    /// The ULT's id and name.
    pub fn thread(&self) -> Thread {
        thread_of(self.tcb)
    }
}

impl<T> Drop for JoinHandle<T> {
    fn drop(&mut self) {
        release(self.tcb);
    }
}

impl<T> fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinHandle").field("thread", &self.thread()).finish()
    }
}

/// Blocks until the ULT behind `t` has published COMPLETE.
///
/// Inlined into `join`, with the wait of an OS thread out of line: a ULT's wait is a shallow one
/// (see "Switch depth" in `crate::sync::wait`).
#[inline]
fn wait_for_exit(t: TcbRef) {
    let tcb = t.tcb();
    let here = current_processor();
    if let Some((p, me)) = here.and_then(|p| Some((p, p.current_ult()?))) {
        if std::thread::panicking() {
            // It must not switch while it unwinds (`crate::anchor`); or a child that the join fast
            // path started here switched while unwinding, and waits for this join to anchor.
            // SAFETY: `me` is the ULT running this code, on `p`; such a child is one of ours.
            unsafe {
                crate::anchor::join_while_unwinding(
                    p,
                    me,
                    t,
                    move |me, p| register_joiner(me, p, t, false),
                    wait_for_exit_thread,
                )
            };
        } else {
            // A ULT: block; the loop registers us after the switch (the join protocol in `tcb`). A
            // ULT joining one of another runtime holds a claim on its own runtime until woken, so
            // the waker (or the joined runtime's shutdown) can reach it even while its runtime is
            // dropped.
            let foreign = !p.shared.is_own(t);
            if foreign {
                crate::runtime::claim_outside(&p.shared);
            }
            let after = move |me, p: &Processor| register_joiner(me, p, t, foreign);
            // SAFETY: `me` is the ULT running this code (the processor's current ULT).
            unsafe { park_ult(me, after) };
        }
        if !tcb.head.join.is_complete() {
            crate::fatal("a joining ULT was woken before the ULT it joins finished");
        }
    } else {
        wait_for_exit_thread(t);
    }
}

/// The join's action after the joining ULT `me` switched out, on its processor `p`: registers `me`
/// as `t`'s joiner, or wakes it at once if `t` has finished meanwhile (`foreign`: `t` belongs to
/// another runtime, and `me` holds a claim on its own, given up here in that case).
#[inline(always)]
fn register_joiner(me: TcbRef, p: &Processor, t: TcbRef, foreign: bool) {
    let tcb = t.tcb();
    crate::deadlock::note_wait(me, crate::deadlock::WaitKind::Join, t.as_ptr() as usize);
    // SAFETY: the waiter field is written only before WAITER is set, by this single joiner.
    unsafe { *tcb.links.waiter.get() = Waiter::Ult(me) };
    let prev = tcb.head.join.register_waiter();
    if prev & JoinState::COMPLETE != 0 {
        // The ULT exited before it could see WAITER: nobody else will wake us, nor read the
        // waiter field, which we clear (a free TCB's waiter is `None`).
        // SAFETY: the exiter did not see WAITER, so the field is still ours alone.
        unsafe { *tcb.links.waiter.get() = Waiter::None };
        p.wake(me);
        if foreign {
            // SAFETY: our runtime is alive (its processor runs this); this gives up the claim the
            // joiner took before it switched.
            unsafe { crate::runtime::release_outside_claim(Arc::as_ptr(&p.shared)) };
        }
    }
}

/// [`wait_for_exit`] of an OS thread (or of a processor's own loop code, which has no ULT to
/// block): park.
///
/// The thread may be a ULT's, anchored while it unwinds (`crate::anchor`): a ULT that is done
/// unwinding rejoins a processor first and waits as a ULT; one that still unwinds waits here,
/// recorded in its TCB for the deadlock report.
#[cold]
fn wait_for_exit_thread(t: TcbRef) {
    if crate::anchor::rejoin_if_done() {
        return wait_for_exit(t);
    }
    let tcb = t.tcb();
    // SAFETY: the waiter field is written only before WAITER is set, by this single joiner.
    unsafe { *tcb.links.waiter.get() = Waiter::Thread(std::thread::current()) };
    let prev = tcb.head.join.register_waiter();
    if prev & JoinState::COMPLETE != 0 {
        // As in `wait_for_exit`: the field is ours alone; a free TCB's waiter is `None`.
        // SAFETY: the exiter did not see WAITER.
        unsafe { *tcb.links.waiter.get() = Waiter::None };
        return;
    }
    let park = || {
        while !tcb.head.join.is_complete() {
            if current_ult_processor().is_some() {
                crate::fatal("a joining ULT was woken before the ULT it joins finished");
            }
            std::thread::park();
        }
    };
    match crate::anchor::anchored() {
        None => crate::deadlock::OsWait::during(false, park),
        Some(me) => {
            crate::deadlock::note_anchored_wait(me, crate::deadlock::WaitKind::Join, t.as_ptr() as usize);
            crate::anchor::unwatched(park);
            crate::anchor::after_wait();
        }
    }
}

/// The processor running the caller, if the caller is a ULT (not a plain OS thread, and not the
/// processor's own loop code, which has no ULT to block).
#[inline]
fn current_ult_processor<'a>() -> Option<&'a Processor> {
    current_processor().filter(|p| p.current_ult().is_some())
}

/// The handle's side of the join protocol: let go of the TCB.
fn release(t: TcbRef) {
    release_on(t, current_processor());
}

/// [`release`] for a caller that already knows the processor it runs on (if any).
#[inline]
fn release_on(t: TcbRef, here: Option<&Processor>) {
    let prev = t.tcb().head.join.detach();
    let finish = if prev & JoinState::COMPLETE != 0 { Finish::Complete } else { Finish::Running };
    // SAFETY: the AcqRel RMW decides: with COMPLETE in `prev` the exiter is done with the TCB and
    // left it to us; without, the exiter sees DETACHED and recycles it.
    unsafe { let_go(t, here, finish) };
}

/// What a handle finds of its ULT at its last step ([`let_go`]).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Finish {
    /// Not finished: the exiter recycles the TCB when it sees the handle gone.
    Running,
    /// Finished, its outcome untaken (a dropped handle): the task is dropped through its vtable,
    /// which hands a panic to the runtime's hook for detached ones.
    Complete,
    /// Finished and joined (COMPLETE observed with `Acquire`), its outcome taken: what is left of
    /// an inline task needs no drop call ([`Tcb::drop_spent_task`](crate::tcb::Tcb::drop_spent_task)).
    Joined,
}

/// The handle's last step: if the ULT finished (`Complete` or `Joined`), the TCB is ours to give
/// back (its task dropped, reset, then a clean-up note to the exiting processor, or straight to
/// the pool on that processor); in any case the handle's count (or outside claim) is given up.
///
/// A join that observed COMPLETE comes here without setting DETACHED: the exiter's last access
/// to the join state is its COMPLETE RMW (`settle` works from what that RMW returned), so once a
/// joiner has seen COMPLETE with `Acquire` nobody else reads or writes the join state, and the
/// read-modify-write would only move the line between the cores once more.
///
/// # Safety
/// `Complete` and `Joined`: COMPLETE was observed with `Acquire` (or returned by this handle's
/// own RMW); `Joined`: this handle took the outcome. This handle is the only one (it is being
/// consumed).
#[inline]
unsafe fn let_go(t: TcbRef, here: Option<&Processor>, finish: Finish) {
    let tcb = t.tcb();
    let exit = tcb.exit_processor();
    let complete = finish != Finish::Running;
    if complete {
        // SAFETY: complete and ours: the exiting processor no longer touches the task nor the rest
        // of the TCB, which we reset for its next use before the clean-up note; a joined one's
        // outcome was taken.
        unsafe {
            if finish == Finish::Joined {
                tcb.drop_spent_task();
            } else {
                tcb.drop_task();
            }
            tcb.reset();
        }
    }
    match here {
        Some(p) if p.shared.is_own(t) => {
            if complete {
                if exit == p.index {
                    p.reclaim_joined(t);
                } else {
                    p.note_joined(t, exit);
                }
            }
            p.remote().handles.drop_one();
        }
        _ => {
            let shared = t.chunk().shared() as *const crate::runtime::Shared;
            // SAFETY: this handle's claim keeps the shared state alive until the release below.
            let s = unsafe { &*shared };
            if complete {
                s.processors[exit].cleanup.push(crate::queue::cleanup::NoteBatch::one(t));
            }
            // SAFETY: `shared` is live and this handle holds a claim on it, given up here (last touch).
            unsafe { crate::runtime::release_outside_claim(shared) };
        }
    }
}

/// Lets other ready ULTs of this processor run; a no-op for the ULT when nothing else is ready.
/// Outside a ULT it yields the OS thread.
///
/// A ULT that unwinds a panic yields its OS thread instead (it keeps that thread until its
/// unwinding is over, see the caveats page); once its panic is caught, its next yield takes it
/// back to a processor.
///
/// ```
/// use std::sync::atomic::{AtomicBool, Ordering};
/// use std::sync::Arc;
///
/// let rt = elite_rt::Runtime::builder().processors(1).build()?;
/// rt.block_on(|| {
///     let flag = Arc::new(AtomicBool::new(false));
///     let setter = elite_rt::spawn({
///         let flag = flag.clone();
///         move || flag.store(true, Ordering::Release)
///     });
///     // One processor: the spawned ULT runs only when this one lets it.
///     while !flag.load(Ordering::Acquire) {
///         elite_rt::yield_now();
///     }
///     setter.join().unwrap();
/// });
/// # Ok::<(), elite_rt::BuildError>(())
/// ```
#[inline]
pub fn yield_now() {
    match current_processor().and_then(|p| p.current_ult()) {
        Some(me) => {
            // (A ULT that yields while it unwinds is anchored by its processor after the switch:
            // `crate::anchor`.)
            let y = me.tcb().exec.yielder.get();
            // SAFETY: `me` runs this code, so its yielder (set when it started on its context)
            // lives on its stack.
            unsafe { (*y).suspend(Switch::YIELD) };
        }
        None => yield_thread(),
    }
}

/// [`yield_now`] outside a processor: an OS thread yields, and so does a ULT anchored to its OS
/// thread while it unwinds; one whose unwinding is over rejoins a processor instead
/// (`crate::anchor`).
#[cold]
fn yield_thread() {
    if !crate::anchor::rejoin_if_done() {
        std::thread::yield_now();
    }
}

/// Puts the running ULT to sleep for at least `dur` without blocking its processor. Outside a ULT
/// it sleeps the OS thread.
///
/// ```
/// use std::time::{Duration, Instant};
///
/// let rt = elite_rt::Runtime::builder().processors(1).build()?;
/// let slept = rt.block_on(|| {
///     // The sleeper's processor runs this other ULT meanwhile.
///     let busy = elite_rt::spawn(|| (0..1000u64).sum::<u64>());
///     let start = Instant::now();
///     elite_rt::sleep(Duration::from_millis(5));
///     assert_eq!(busy.join().unwrap(), 499_500);
///     start.elapsed()
/// });
/// assert!(slept >= Duration::from_millis(5));
/// # Ok::<(), elite_rt::BuildError>(())
/// ```
pub fn sleep(dur: Duration) {
    // A ULT that unwinds sleeps anchored to its OS thread (`crate::anchor`).
    crate::anchor::at_switch_point();
    if current_ult_processor().is_some() {
        let deadline = Instant::now() + dur;
        while Instant::now() < deadline {
            suspend(Switch::sleep(&Deadline(deadline))); // (read by the processor after the switch)
        }
    } else {
        std::thread::sleep(dur);
    }
}

/// A ULT's unique identifier within its runtime.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ThreadId(u64);

impl ThreadId {
    /// The id as a number.
    pub fn as_u64(&self) -> u64 {
        self.0
    }
}

/// A description of a ULT: id, name, and the processor it was on when the description was taken.
///
/// ```
/// let rt = elite_rt::Runtime::builder().processors(2).build()?;
/// let handle = elite_rt::Builder::new().name("worker".into()).spawn_on(&rt, || {
///     let me = elite_rt::current();
///     (me.name().map(str::to_owned), me.processor() < 2)
/// })?;
/// assert_eq!(handle.join().unwrap(), (Some("worker".to_owned()), true));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
pub struct Thread {
    id: ThreadId,
    name: Option<Arc<str>>,
    processor: usize,
    group: Option<crate::Group>,
}

impl Thread {
    /// The ULT's id.
    pub fn id(&self) -> ThreadId {
        self.id
    }

    /// The ULT's name, if it was given one.
    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    /// The processor the ULT ran on when this description was taken (for [`current`]: the one
    /// running it now; it may move after any switch).
    pub fn processor(&self) -> usize {
        self.processor
    }

    /// The ULT's [`Group`](crate::Group), if it is in one ([`Builder::group`], or its spawner's).
    pub fn group(&self) -> Option<crate::Group> {
        self.group.clone()
    }
}

pub(crate) fn thread_of(t: TcbRef) -> Thread {
    let tcb = t.tcb();
    Thread {
        id: ThreadId(tcb.head.id.get()),
        // SAFETY: the name is written at spawn, before the handle or the ULT exists, then immutable.
        name: unsafe { (*tcb.links.name.get()).clone() },
        processor: tcb.head.processor.load(Ordering::Relaxed),
        group: match tcb.head.group.get() {
            0 => None,
            // SAFETY: a chunk's `shared` is its runtime's `Shared`, alive while its TCBs are
            // used (as for `TcbRef::chunk`).
            n => Some(
                unsafe { &*(t.chunk().shared() as *const crate::runtime::Shared) }
                    .groups
                    .slot(n)
                    .group
                    .clone(),
            ),
        },
    }
}

/// The running ULT, or `None` outside one.
///
/// ```
/// assert!(elite_rt::try_current().is_none()); // the main thread is no ULT
/// let rt = elite_rt::Runtime::builder().processors(1).build()?;
/// let id = rt.block_on(|| elite_rt::try_current().map(|t| t.id()));
/// assert!(id.is_some());
/// # Ok::<(), elite_rt::BuildError>(())
/// ```
pub fn try_current() -> Option<Thread> {
    match current_processor().map(|p| (p, p.current_ult())) {
        Some((p, Some(me))) => {
            let mut th = thread_of(me);
            th.processor = p.index;
            Some(th)
        }
        Some((_, None)) => None,
        // A ULT anchored to its OS thread while it unwinds (`crate::anchor`): the processor it
        // last ran on.
        None => crate::anchor::anchored().map(thread_of),
    }
}

/// The running ULT.
///
/// # Panics
///
/// Panics outside a ULT; use [`try_current`] where that can happen.
///
/// ```
/// let rt = elite_rt::Runtime::builder().processors(1).build()?;
/// let (a, b) = rt.block_on(|| {
///     let child = elite_rt::spawn(|| elite_rt::current().id());
///     (elite_rt::current().id(), child.join().unwrap())
/// });
/// assert_ne!(a, b); // every ULT has its own id
/// # Ok::<(), elite_rt::BuildError>(())
/// ```
pub fn current() -> Thread {
    try_current().unwrap_or_else(|| {
        panic!("elite_rt::current() called outside a ULT: run the code inside Runtime::block_on or a spawned ULT")
    })
}

impl crate::Runtime {
    pub(crate) fn spawn_spec<F, T>(&self, spec: UltSpec, f: F) -> JoinHandle<T>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.spawn_with(spec, f)
    }
}
