//! What a processor hands out from its own pools first: TCBs (for spawns), contexts with their
//! stacks (for starts), ULT ids, and the pushes of new ULTs onto the start-queues.

use super::Processor;
use crate::atomics::Ordering;
use crate::pool::Got;
use crate::slot::current_processor;
use crate::stack::UltStack;
use crate::switch::Switch;
use crate::tcb::{Context, Tcb, TcbRef, Ult, UltYielder, Waiter};
use crate::SpawnError;
use std::ptr;

/// Most entries a full own start-queue moves down a level at once (half its limit, up to this).
const SPILL_MAX: usize = 512;

/// How many takes ahead of the one it serves a take from the local TCB pool prefetches
/// ([`Processor::alloc_tcb`]): the lines of a pooled TCB are often in main memory, whose latency
/// is several spawns' worth of time in a loop of spawns, so a prefetch for the very next take
/// arrives late. A longer distance costs only the hinted lines' cache room until their use
/// (8 TCBs: 24 lines).
const TCB_PREFETCH_AHEAD: usize = 8;

impl Processor {
    /// A context on a new stack: its coroutine's function is the trampoline that runs one ULT
    /// after another (see [`Context`]).
    #[cold]
    fn new_context(stack: UltStack) -> Box<Context> {
        let (canary_at, guard_at, usable) = (stack.canary_addr(), stack.guard_addr(), stack.usable());
        // Resumed with nothing (a zero-sized value crosses the switch in a register, with
        // corosensei's unwind flag): the trampoline looks its processor up when a ULT starts and
        // when it exits, not at every switch.
        let co = Ult::with_stack(stack, |y: &UltYielder, ()| loop {
            // A context is resumed only by a processor, on the OS thread running it.
            let Some(t) = current_processor().and_then(|p| p.current_ult()) else {
                crate::fatal("a context started with no current ULT");
            };
            let tcb = t.tcb();
            tcb.exec.yielder.set(y);
            // ULT-local values die with the ULT, also when shutdown unwinds it (`crate::local`).
            let locals = crate::local::UltLocals(t);
            // SAFETY: the task is live (set at spawn, consumed only after COMPLETE) and only
            // the processor running this ULT calls `run`.
            unsafe { (tcb.head.vtable.get().run)(tcb.head.task.get()) };
            locals.destroy(); // before the exit is published: the joiner sees their destructors
            std::mem::forget(locals);
            // Publish the exit here, on the ULT's own stack: dropping a detached ULT's result
            // runs user code, which may join, yield or sleep like any ULT code. The task may
            // have switched: the processor running us now is the last one that resumed us. A
            // ULT anchored to its OS thread while it unwound (`crate::anchor`), its panic caught
            // now, rejoins a processor first.
            let p = match current_processor() {
                Some(p) => p,
                None => crate::anchor::rejoin_at_exit(t),
            };
            p.publish_from_ult(t);
            // At rest until the next ULT: nothing with drop glue lives in this frame here.
            y.suspend(Switch::EXIT);
        });
        Box::new(Context { co, canary_at, guard_at, usable, at_rest: false })
    }

    #[cold]
    pub(super) fn fail_start(&self, t: TcbRef, e: std::io::Error) {
        self.remote().stats.stack_failures.bump();
        self.shared.stacks_exhausted.store(true, Ordering::Relaxed);
        let err = SpawnError::Stack { size: t.tcb().stack_size(), error: e.to_string() };
        let tcb = t.tcb();
        // SAFETY: this processor owns the never-started task.
        unsafe { (tcb.head.vtable.get().fail)(tcb.head.task.get(), Box::new(err)) };
        // Never started: no ULT stack to publish from; a detached one's closure is dropped here, on
        // the loop (where join, yield and sleep act like on a plain OS thread).
        let prev = self.publish(t);
        self.settle(t, prev);
    }

    /// A context for a ULT with a `size`-byte stack: pooled when `size` is the runtime's default.
    #[inline]
    pub(super) fn get_context(&self, size: usize) -> std::io::Result<Box<Context>> {
        let shared = &*self.shared;
        let stats = &self.remote().stats;
        if size == self.stack_size && self.central {
            if let Some(c) = shared.nodes[0].stacks.take_one() {
                return Ok(c);
            }
        } else if size == self.stack_size {
            match self.core().stack_pool.get(&shared.nodes[self.remote().node].stacks) {
                Got::Hit(c) => {
                    stats.stack_pool_hits.bump();
                    return Ok(c);
                }
                Got::Underflow(c) => {
                    stats.stack_pool_misses.bump();
                    stats.stack_pool_underflows.bump();
                    return Ok(c);
                }
                Got::Empty => stats.stack_pool_misses.bump(),
            }
        }
        stats.stack_fresh.bump();
        UltStack::allocate(size, shared.config.stack_kind).map(Self::new_context)
    }

    /// Returns the context of an exited ULT to the pool (at rest).
    #[inline]
    pub(super) fn put_context(&self, mut c: Box<Context>) {
        c.at_rest = true;
        let shared = &*self.shared;
        if shared.stacks_exhausted.load(Ordering::Relaxed) {
            shared.stacks_exhausted.store(false, Ordering::Relaxed); // memory is coming back
        }
        if c.usable != self.stack_size {
            return; // odd sizes are not pooled: dropping `c` unmaps its stack
        }
        if self.central {
            shared.nodes[0].stacks.put_one(c);
        } else if self.core().stack_pool.put(c, &shared.nodes[self.remote().node].stacks) {
            self.remote().stats.stack_pool_overflows.bump();
        }
    }

    /// Returns a reset TCB to this processor's pool (touching only the pointer).
    #[inline]
    pub(super) fn pool_tcb(&self, t: TcbRef) {
        // A free TCB names no waiter: `settle` (which ran on this processor before anything could
        // bring the TCB here) took a registered one, and a joiner that registered after the exit
        // cleared its own (see `Tcb::reset`).
        // SAFETY: the TCB is finished and this processor pools it: nobody else accesses it.
        debug_assert!(matches!(unsafe { &*t.tcb().links.waiter.get() }, Waiter::None));
        let shared = &*self.shared;
        if self.central {
            shared.nodes[0].tcbs.put_one(t);
        } else if self.core().tcb_pool.put(t, &shared.nodes[self.remote().node].tcbs) {
            self.remote().stats.tcb_pool_overflows.bump();
        }
    }

    /// Takes a TCB from the pool hierarchy, allocating a fresh chunk only when both levels are empty.
    ///
    /// A take served by the local pool prefetches the first lines of the TCB it will hand out
    /// [`TCB_PREFETCH_AHEAD`] takes later (if it holds that many), so that a loop of spawns
    /// finds its TCBs cached even when they come from main memory (a million ULTs spawned
    /// before any is joined hold hundreds of megabytes of TCBs).
    #[inline]
    pub(crate) fn alloc_tcb(&self) -> TcbRef {
        let shared = &*self.shared;
        let stats = &self.remote().stats;
        if self.central {
            return shared.nodes[0].tcbs.take_one().unwrap_or_else(|| self.alloc_chunk());
        }
        let pool = &mut self.core().tcb_pool;
        match pool.get(&shared.nodes[self.remote().node].tcbs) {
            Got::Hit(t) => {
                stats.tcb_pool_hits.bump();
                // The TCB of the spawn `TCB_PREFETCH_AHEAD` spawns from now (pooled TCBs were
                // last touched by their joiners, often long ago or on another processor).
                if let Some(n) = pool.peek(TCB_PREFETCH_AHEAD) {
                    crate::prefetch::start_lines(n.as_ptr());
                }
                t
            }
            Got::Underflow(t) => {
                stats.tcb_pool_misses.bump();
                stats.tcb_pool_underflows.bump();
                t
            }
            Got::Empty => {
                stats.tcb_pool_misses.bump();
                match self.tcb_from_other_nodes() {
                    Some(t) => {
                        stats.tcb_pool_underflows.bump();
                        t
                    }
                    None => {
                        stats.tcb_fresh.bump();
                        self.alloc_chunk()
                    }
                }
            }
        }
    }

    /// This processor's pool and its node's are empty: refill from another node's pool before
    /// allocating fresh TCBs. TCBs are never returned to the system (they live in chunks), so
    /// without this a steady flow of ULTs spawned on one node and ending on another (stolen, or
    /// woken there) would pile TCBs up in the second node's pool while the first allocates for
    /// ever (the soak test found it on a 2x2 topology).
    #[cold]
    fn tcb_from_other_nodes(&self) -> Option<TcbRef> {
        let nodes = &self.shared.nodes;
        let here = self.remote().node;
        (1..nodes.len()).find_map(|k| match self.core().tcb_pool.get(&nodes[(here + k) % nodes.len()].tcbs) {
            Got::Hit(t) | Got::Underflow(t) => Some(t),
            Got::Empty => None,
        })
    }

    #[cold]
    fn alloc_chunk(&self) -> TcbRef {
        let mut tcbs = self.shared.new_chunk();
        let first = tcbs.pop().unwrap_or_else(|| crate::fatal("empty TCB chunk"));
        let node = &self.shared.nodes[self.remote().node].tcbs;
        for t in tcbs {
            if self.central {
                node.put_one(t);
            } else {
                let _ = self.core().tcb_pool.put(t, node);
            }
        }
        first
    }

    /// Next ULT id of this processor: unique runtime-wide without a shared counter.
    #[inline]
    pub(crate) fn next_id(&self) -> u64 {
        let core = self.core();
        core.id_seq += 1;
        core.id_seq * self.shared.processors.len() as u64 + self.index as u64
    }

    /// Puts a new ULT on this processor's start-queue, overflowing to the node and global levels.
    #[inline]
    pub(crate) fn push_start(&self, t: TcbRef) {
        let shared = &*self.shared;
        let core = self.core();
        if self.central {
            shared.global_start.push(t.as_ptr());
        } else if let Err(t) = self.remote().start.push_within(t.as_ptr(), core.start_limit) {
            self.push_start_overflow(t);
        }
        shared.notify_any();
    }

    /// The own start-queue is full: its oldest half moves down to the node's level in one batch
    /// (what the node cannot hold goes on to the global level), then `t` goes on the own queue.
    /// The newest entries stay here, where this processor starts them next; the oldest, which it
    /// would start last, go where other processors of the node take them in batches.
    #[cold]
    pub(super) fn push_start_overflow(&self, t: *mut Tcb) {
        let shared = &*self.shared;
        let remote = self.remote();
        let core = self.core();
        let half = (core.start_limit / 2).clamp(1, SPILL_MAX);
        let mut spill = std::mem::take(&mut core.spill);
        spill.resize(half, ptr::null_mut());
        let k = remote.start.take_oldest(&mut spill);
        let to_node = shared.nodes[remote.node].start.push_batch(&spill[..k]);
        remote.stats.start_overflow_node.add(to_node as u64);
        if to_node < k {
            remote.stats.start_overflow_global.add((k - to_node) as u64);
            shared.global_start.push_batch(&spill[to_node..k]);
        }
        self.core().spill = spill;
        // There is room now: the claim took at least one entry, or thieves emptied the queue
        // before it. (Should `t` still not fit, it goes down a level too.)
        if let Err(t) = remote.start.push_within(t, core.start_limit) {
            match shared.nodes[remote.node].start.push(t) {
                Ok(()) => remote.stats.start_overflow_node.bump(),
                Err(t) => {
                    remote.stats.start_overflow_global.bump();
                    shared.global_start.push(t);
                }
            }
        }
    }
}
