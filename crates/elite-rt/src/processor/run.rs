//! The loop (DESIGN §4) and the transitions of a ULT: run a round (step 1, then the steps of
//! `find`), switch into a ULT and finish whatever transition it switched out with, the direct
//! hand-off to the ULT the transition made ready, the yield batch's round-robin, and the join
//! fast path that starts a child on its joiner's stack.

use super::worker::Worker;
use super::{Hooked, Processor};
use crate::atomics::Ordering;
use crate::queue::run::REFILL_FROM;
use crate::slot::set_current_processor;
use crate::switch::{Deadline, Park, Switch};
use crate::tcb::{Life, TcbRef};
use crate::timer::Due;
use corosensei::CoroutineResult;
use std::ptr;
use std::time::Instant;

/// What [`Processor::yield_from_batch`] did with a yield.
#[must_use]
enum FromBatch {
    /// Switch to this ULT now.
    Run(TcbRef),
    /// Go back to the loop (the yielder is queued, the ULT to run next is in the `next` slot).
    Loop,
    /// Nothing: the general yield path takes it.
    Elsewhere,
}

/// How the join fast path ([`Processor::start_inline`]) went.
#[must_use]
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Inline {
    /// The child was not the newest entry of the start-queue (already taken, or buried).
    NotStarted,
    /// The child started and switched out before finishing; the join protocol goes on as usual.
    Switched,
    /// The child started and returned. Its joiner holds the only handle (being consumed by
    /// value, so no other reference to it exists) and runs on this processor: the join state
    /// was not published, the TCB is not on the deathrow, and the joiner takes the output and
    /// recycles the TCB directly ([`Processor::reclaim_inline`]).
    Finished,
}

/// Ready ULTs in the runqueue from which a yield may take a batch: with the yielder, the
/// [`REFILL_FROM`] that `RunQueue::yield_refill` asks for.
const BATCH_FROM: usize = REFILL_FROM - 1;

impl Processor {
    /// Runs the processor on the calling OS thread, the worker `w`, until `w.stop` is raised (by
    /// shutdown, or by this thread's own blocking handoff). `pinned` is the CPU the thread is
    /// pinned to, if any: a thread that takes over another processor pins itself to its CPU.
    pub(crate) fn run(&self, w: &Worker, pinned: &mut Option<usize>) {
        let cpu = self.shared.config.topology.processor(self.index).cpu;
        if self.shared.config.pin && *pinned != Some(cpu) {
            if elite_affinity::pin_current_thread(cpu).is_ok() {
                *pinned = Some(cpu);
            } else {
                self.shared.pin_failures.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.remote().park.register(std::thread::current());
        set_current_processor(Some(self));
        // A panic in the loop is a runtime bug: abort rather than limp on.
        let guard = crate::AbortOnPanic("the processor loop");
        self.run_loop(w);
        std::mem::forget(guard);
        set_current_processor(None);
    }

    /// Whether the ULT that just switched out was resumed by the join fast path (a joiner's stack)
    /// rather than by the loop's bottom frame.
    #[inline]
    pub(crate) fn running_inline(&self) -> bool {
        self.core().inline_child.is_some()
    }

    fn run_loop(&self, w: &Worker) {
        loop {
            // Raised by shutdown, and by a blocking handoff of this thread (the processor then
            // belongs to another thread: this one leaves without touching it).
            if w.stop.load(Ordering::Relaxed) {
                return;
            }
            self.maintain();
            if let Some(t) = self.take_ready() {
                // Prefetch hook (`crate::prefetch`): the chosen ULT's data, and the next one's.
                self.prefetch_chosen(t);
                self.dispatch(t, w);
                continue;
            }
            if let Some(t) = self.take_start() {
                self.start_ult(t, w);
                continue;
            }
            if let Some(t) = self.steal() {
                self.dispatch(t, w);
                continue;
            }
            if self.trace.is_some() {
                self.idle_traced(); // (`crate::trace`)
            } else {
                self.idle();
            }
        }
    }

    /// Runs `t`, giving it a stack first if it never ran; `w` is the calling thread's worker.
    #[inline]
    fn dispatch(&self, t: TcbRef, w: &Worker) {
        if t.tcb().head.life.get() == Life::Queued {
            self.start_ult(t, w);
        } else {
            self.run_ult(t, w);
        }
    }

    /// Prefetches what `t`, chosen to run now, will touch first and, when it declared a block,
    /// the control block and the declared block of the ULT the runqueue would hand out after it
    /// (see `crate::prefetch`).
    /// For ULTs without a block, and whenever prefetch is off (no ULT has a prefetch word then):
    /// one load of a line the switch reads anyway, and a branch.
    #[inline(always)]
    fn prefetch_chosen(&self, t: TcbRef) {
        if crate::prefetch::ult(t) {
            self.prefetch_next();
        }
    }

    /// The part of [`prefetch_chosen`](Self::prefetch_chosen) for the next ULT's block, out of
    /// line: only a chosen ULT that declared a block gets here, and inlined into the loop it
    /// cost every switch a few instructions (callgrind, `scripts/hot-paths.sh`). Notes the
    /// choice in the processor's measurement of whether the prefetch pays (`prefetch::Payoff`),
    /// and when its answer is yes, prefetches the block of the runqueue's next ULT.
    #[inline(never)]
    fn prefetch_next(&self) {
        let draw = self.next_random();
        let core = self.core();
        let began = crate::sync::ticks();
        let on = core.payoff.choose(began, core.rounds, draw);
        if let Some(next) = self.runq().peek_best() {
            crate::prefetch::control_block(next);
            if on {
                crate::prefetch::next_block(next);
            }
        }
        self.core().payoff.prefetched(began, crate::sync::ticks());
    }

    /// `n`, the ULT the chain of `run_ult_as` switches to next (the hand-off, the yield batch):
    /// the prefetch hook, as [`prefetch_chosen`](Self::prefetch_chosen), and whether `n` is in a
    /// group (the copies of the loop without every hook then hand the chain over to the one
    /// with them). One test of the head's rare-case bits (`tcb::Rare`) for both: a load of a
    /// line the switch reads anyway, and a branch, for a ULT with neither.
    #[inline(always)]
    fn chosen(&self, n: TcbRef) -> bool {
        // SAFETY: this processor took `n` to run it next: it holds it.
        if unsafe { n.tcb().head.rare_held() } == 0 {
            return false;
        }
        std::hint::cold_path();
        self.chosen_rare(n)
    }

    /// The part of [`chosen`](Self::chosen) for a ULT with a rare-case bit set, out of line.
    #[inline(never)]
    fn chosen_rare(&self, n: TcbRef) -> bool {
        self.prefetch_chosen(n);
        n.tcb().head.group.get() != 0
    }

    /// Step 1: wake-ups into the runqueue, clean-up notes, due timers.
    #[inline]
    fn maintain(&self) {
        let core = self.core();
        core.rounds = core.rounds.wrapping_add(1);
        if core.rounds.is_multiple_of(64) {
            self.flush_notes(); // held-back clean-up notes wait at most 64 rounds
            self.follow_policy(); // a policy set meanwhile (`Runtime::set_policy`)
            self.flush_trace(); // the trace ring, if any (`crate::trace`)
        }
        let remote = self.remote();
        if !remote.wakeup.is_empty() {
            let (mut n, mut homing) = (0, 0);
            for t in remote.wakeup.drain() {
                if t.tcb().exec.gather.take_homing() {
                    homing += 1;
                }
                self.make_ready(t);
                n += 1;
            }
            remote.stats.wakeup_drained.add(n);
            // More than one woken: let an idle processor help, unless they were sent here to be
            // gathered (`sync::mutex::gather`), which a helper would only send back.
            if n - homing > 1 {
                self.shared.notify_any();
            }
        }
        if !remote.cleanup.is_empty() {
            for batch in remote.cleanup.drain() {
                remote.stats.cleanup_notes.add(batch.len() as u64);
                for t in batch.tcbs() {
                    // The joiner reset the TCB: count it off and pool the pointer.
                    self.core().deathrow.leave();
                    self.pool_tcb(t);
                }
            }
        }
        if !self.core().timers.is_empty() {
            self.fire_timers();
        }
    }

    /// Makes every sleeper whose deadline passed ready, so that they run in deadline order.
    #[cold]
    fn fire_timers(&self) {
        let now = Instant::now();
        let mut due = std::mem::take(&mut self.core().scratch);
        while let Some(d) = self.core().timers.pop_due(now) {
            match d {
                Due::Sleep(t) => due.push(t),
                // A timed wait's deadline: the ULT is ours to run only if the deadline won the race
                // against a notifier (see `sync::wait`).
                Due::Wait(t, seq) => {
                    if crate::sync::wait::time_out(t, seq) {
                        due.push(t);
                    }
                }
            }
        }
        // Enter the runqueue latest deadline first: with equal priorities the runqueue hands out
        // the newest entry first, so the earliest deadline runs first.
        for t in due.drain(..).rev() {
            self.enqueue(t);
        }
        self.core().scratch = due;
    }

    /// Arms the deadline of timed wait `seq` of `t`, a ULT that just blocked on this processor.
    #[inline]
    pub(crate) fn add_wait_timer(&self, deadline: Instant, t: TcbRef, seq: u64) {
        self.core().timers.insert_wait(deadline, t, seq);
    }

    /// The join fast path: if `t` is the newest entry of this processor's start-queue, start it
    /// now, from the joining ULT, instead of blocking the joiner and letting the loop start it.
    ///
    /// The child still gets its own stack and runs as itself (`current` names it); its coroutine is
    /// resumed from the joiner's stack rather than the loop's. When it returns or switches out
    /// (yield, block, sleep), control comes back here and the transition is finished exactly as
    /// the loop would finish it, on the joiner's stack, never the child's. The joiner then reads
    /// the join state as usual and blocks only if the child has not finished. Popping the entry is
    /// what proves this processor owns `t`; an entry that is not `t` is pushed back on top, which
    /// restores the queue's order.
    ///
    /// Only the ULT currently running on this processor calls this.
    pub(crate) fn start_inline(&self, t: TcbRef) -> Inline {
        match self.pop_start() {
            Some(top) if top == t => {}
            Some(top) => {
                // It came from there, and nothing was pushed since: there is room.
                let _ = self.remote().start.push(top.as_ptr());
                return Inline::NotStarted;
            }
            None => return Inline::NotStarted,
        }
        self.remote().stats.start_local.bump();
        let joiner = self.current.get();
        let outer = self.core().inline_child.replace(t);
        // Scheduler code runs here on the joiner's stack: a panic in it is a runtime bug, as in the
        // loop, not something for the joiner to catch.
        let guard = crate::AbortOnPanic("the join fast path");
        if let Some(j) = joiner {
            self.core().engine.pause(j);
        }
        self.core().no_hand_off += 1;
        self.start_ult(t, super::worker::current_worker());
        self.core().no_hand_off -= 1;
        if joiner.is_some() {
            self.core().engine.resume();
        }
        std::mem::forget(guard);
        // `exit` clears the mark when the child returned during this run.
        let finished = self.core().inline_child != Some(t);
        self.core().inline_child = outer;
        self.current.set(joiner);
        if finished {
            Inline::Finished
        } else {
            Inline::Switched
        }
    }

    /// Gives a never-run ULT a context (a stack) from this processor's pool and runs it; `w` is
    /// the calling thread's worker.
    fn start_ult(&self, t: TcbRef, w: &Worker) {
        let tcb = t.tcb();
        let ctx = match self.get_context(tcb.stack_size()) {
            Ok(c) => c,
            Err(e) => return self.fail_start(t, e),
        };
        // SAFETY: this processor owns the TCB (it took it from a start-queue); a never-started
        // ULT has no context, so the write overwrites a `None` (nothing to drop).
        unsafe { ptr::write(tcb.exec.context.get(), Some(ctx)) };
        // SAFETY: as above; the context holds its stack until the ULT exits.
        tcb.exec.guard_at.set(unsafe { (*tcb.exec.context.get()).as_ref() }.map_or(0, |c| c.guard_at));
        crate::prefetch::UltBlock::on_start(t, self.prefetch_lines);
        tcb.head.life.set(Life::Started);
        if tcb.head.pinned.get() {
            self.core().pinned_here += 1;
        }
        self.run_ult(t, w);
    }

    /// Switches into `t` and finishes whatever transition it switched out with; then, when the
    /// transition left a ULT in the `next` slot and nothing else waits here, switches into that one
    /// at once (see [`Processor::hand_off`]), and so on.
    ///
    /// `w` is the calling OS thread's worker (`crate::blocking`), passed down from the loop (or
    /// looked up once by the join fast path) rather than read from a thread-local after every
    /// park.
    ///
    /// Three copies of the loop, chosen here once per call (`hooked`): without hooks, which is
    /// what runs unless one was asked for, and tests nothing for them at its switches; with the
    /// policy's end of a run only (a recording policy whose counter source needs nothing at a
    /// run's beginning: every policy but no-affinity where there is no PMU), which calls it after
    /// every switch and tests nothing else; and with every hook (a hardware counter's beginning
    /// of a run, unguarded stacks' canary, the trace), each tested at each switch.
    #[inline]
    fn run_ult(&self, t: TcbRef, w: &Worker) {
        match self.hooked.get() {
            Hooked::None => self.run_ult_as::<{ Hooked::NONE }>(t, w),
            Hooked::RunEnd => self.run_ult_as::<{ Hooked::RUN_END }>(t, w),
            Hooked::All => {
                std::hint::cold_path();
                self.run_ult_as::<{ Hooked::ALL }>(t, w);
            }
        }
    }

    /// [`Processor::run_ult`] with the hooks `HOOKS` (a [`Hooked`] as a number). Never inlined:
    /// each copy is a function of its own and `run_ult`, a test and a call, inlines into its
    /// callers (inlined into `run_ult`, one copy made every call save the registers the others
    /// need: instructions more on every run, even where no hook runs).
    #[inline(never)]
    fn run_ult_as<const HOOKS: u8>(&self, mut t: TcbRef, w: &Worker) {
        let all = HOOKS == Hooked::ALL;
        // A grouped ULT: the group's counters (`crate::group`) are kept in the copy with every
        // hook only; the others hand it over to that copy, here for the ULT they are called
        // with, and where their chain goes on to another ULT (`chosen`: one test with the
        // prefetch hook's).
        if !all && t.tcb().head.group.get() != 0 {
            std::hint::cold_path();
            return self.run_ult_as::<{ Hooked::ALL }>(t, w);
        }
        let check_canary = all && self.check_canary;
        // Fixed while the loop runs: read once here, not at every resume.
        let (begin_hook, end_hook) = match HOOKS {
            Hooked::ALL => self.core().engine.run_hooks(),
            Hooked::RUN_END => (false, true),
            _ => (false, false),
        };
        // The trace's ring (`crate::trace`): its runs are recorded here, in the copy with every
        // hook only.
        let ring = if all { self.trace.as_deref() } else { None };
        // Whether anything at all runs after a switch out: one test per switch in the copy with
        // every hook, none in the others.
        let after_hooks = HOOKS == Hooked::RUN_END || (all && (end_hook || check_canary || ring.is_some()));
        // What a turn's budget starts from (`budget`), read once: a store per switch.
        let budget_turn = self.budget_turn;
        'chain: loop {
            let tcb = t.tcb();
            // (The copies without every hook run no grouped ULT: see above.)
            let group = if all { tcb.head.group.get() } else { 0 };
            // The coscheduling gate (`contention::gate`): a ULT of a group this processor does
            // not admit now is sent or held there, and the chain goes on without it (in this
            // copy, the one with every hook: `chosen` only for its prefetch).
            let gated = all && group != 0 && self.shared.cosched.is_some();
            if gated && !self.cosched_admits(t, group) {
                match self.hand_off() {
                    Some(n) => {
                        self.chosen(n);
                        t = n;
                        continue 'chain;
                    }
                    None => {
                        self.flush_batch();
                        return;
                    }
                }
            }
            // (The group's counters: whether this run is on another processor than the last.)
            let mut migrated = all && group != 0 && tcb.head.processor.load(Ordering::Relaxed) != self.index;
            let after_hooks = after_hooks || (all && group != 0);
            tcb.head.processor.store(self.index, Ordering::Relaxed);
            // SAFETY: this processor owns the started ULT; the context is Some from `start_ult`
            // until `exit` takes it, after this borrow ends. The ULT's own code never touches the
            // field.
            let ctx = unsafe { (*tcb.exec.context.get()).as_mut() };
            debug_assert!(ctx.is_some(), "ULT without a context");
            // SAFETY: only started ULTs come here (`dispatch`, `start_ult`, and the chain's
            // `hand_off` and `yield_from_batch`, which take only `Life::Started` ones), and a
            // started ULT has its context until `exit` takes it after its last switch (as said
            // above): it is Some.
            let ctx = unsafe { ctx.unwrap_unchecked() };
            let why = loop {
                self.current.set(Some(t));
                self.budget.set(budget_turn); // a new turn: a full budget (`budget`)
                self.remote().stats.switches.bump();
                if begin_hook {
                    std::hint::cold_path();
                    self.core().engine.begin_run();
                }
                if let Some(r) = ring {
                    r.run_begin(t);
                }
                let began = if all && group != 0 {
                    self.core().engine.group_begins(t, group, self.remote().stats.switches.get());
                    Some(Instant::now())
                } else {
                    None
                };
                let why = match ctx.co.resume(()) {
                    CoroutineResult::Yield(why) => why,
                    // The trampoline never returns; only a forced unwind (shutdown) ends it.
                    CoroutineResult::Return(()) => crate::fatal("a ULT context returned"),
                };
                self.current.set(None);
                if gated {
                    self.cosched_left();
                }
                if after_hooks {
                    if all {
                        std::hint::cold_path();
                    }
                    if end_hook {
                        self.core().engine.end_run(t);
                    }
                    if check_canary {
                        self.check_canary(t);
                    }
                    if let Some(r) = ring {
                        // SAFETY: `why` is the word `t` just switched out with; nothing has acted
                        // on it yet (what it points to lives on `t`'s frozen stack).
                        unsafe { r.run_end(t, why) };
                    }
                    if let Some(began) = began {
                        self.group_ran(group, began, migrated);
                        migrated = false;
                    }
                }
                if why == Switch::YIELD {
                    if std::thread::panicking() {
                        // It yields while it unwinds: this thread's panic count is its own, and
                        // nothing else may run here meanwhile (`crate::anchor`).
                        std::hint::cold_path();
                        break Switch::ANCHOR;
                    }
                    self.remote().stats.yields.bump();
                    match self.yield_from_batch(t) {
                        FromBatch::Run(n) => {
                            if self.chosen(n) && !all {
                                return self.run_ult_as::<{ Hooked::ALL }>(n, w);
                            }
                            t = n;
                            continue 'chain;
                        }
                        FromBatch::Loop => {
                            // The step's turn for the loop (shutdown, the shared levels, the
                            // starvation turns): the batch goes back, the chosen ULT waits in
                            // the `next` slot.
                            self.flush_batch();
                            return;
                        }
                        FromBatch::Elsewhere => {}
                    }
                    // Nothing else to run here: resume at once without touching any queue (unless
                    // the chaos mode moves the ULT).
                    // (A gated ULT resumes at once only while its group is still admitted
                    // here; else the yield takes the general path, to the gate.)
                    if self.nothing_else_local()
                        && !self.chaos.on
                        && (!gated || self.cosched_still_admits(group))
                    {
                        continue;
                    }
                }
                break why;
            };
            // The kinds by how often they come: a blocking wait on a synchronization object
            // first (tested alone, so that it is not one case of a jump table).
            if why.kind() <= Switch::LINK_FRONT {
                if std::thread::panicking() {
                    // It blocked while it unwinds: it waits anchored to this thread instead
                    // (`crate::anchor`).
                    std::hint::cold_path();
                    self.anchor_linker(t, why);
                    if w.stop.load(Ordering::Relaxed) {
                        return; // (as after a blocking call's action)
                    }
                } else {
                    // SAFETY: the ULT switched out holding the object's lock, the `LinkTo` and its
                    // node on its frozen stack, the object alive and untouched by anyone else
                    // until the node is linked and the lock released, which this does
                    // (`Switch::link`).
                    unsafe {
                        crate::sync::wait::link_after_switch(why.at(), why.kind() == Switch::LINK_FRONT, t)
                    };
                }
            } else if why == Switch::YIELD {
                self.requeue_yielded(t);
            } else if why.kind() == Switch::PARK {
                let park: *const Park = why.at();
                // SAFETY: `park` points into the blocked ULT's frozen stack, valid until it is
                // resumed, which cannot happen before `action` publishes it.
                unsafe { ((*park).action)(park, t, self) };
                // A blocking call's action may have handed this processor to another OS
                // thread (`crate::blocking::switched`), or shutdown began: leave the loop's
                // frames without touching the processor again (the loop checks the same flag).
                if w.stop.load(Ordering::Relaxed) {
                    return;
                }
            } else if why == Switch::EXIT {
                self.exit(t);
            } else if why.kind() == Switch::SLEEP {
                // SAFETY: the deadline lives on the sleeping ULT's frozen stack.
                let deadline = unsafe { (*why.at::<Deadline>()).0 };
                self.core().timers.insert(deadline, t);
                self.flush_batch();
                return;
            } else {
                debug_assert!(why == Switch::ANCHOR);
                self.anchor_yielder(t);
                // As after a blocking call's action: this thread may have handed the processor
                // over.
                if w.stop.load(Ordering::Relaxed) {
                    return;
                }
            }
            match self.hand_off() {
                Some(n) => {
                    if self.chosen(n) && !all {
                        return self.run_ult_as::<{ Hooked::ALL }>(n, w);
                    }
                    t = n;
                }
                None => {
                    // Back to the loop: every ready ULT in the runqueue (see `YieldBatch`).
                    self.flush_batch();
                    return;
                }
            }
        }
    }

    /// `t` yielded while it unwinds a panic: it is anchored to this OS thread (the processor is
    /// handed over, as for a blocking call) and goes on here, as its yield, until its unwinding is
    /// over (`crate::anchor`).
    #[cold]
    #[inline(never)]
    fn anchor_yielder(&self, t: TcbRef) {
        self.remote().stats.yields.bump();
        crate::blocking::switched(self, t, crate::blocking::CallRef::anchor(t, std::ptr::null()));
    }

    /// `t` switched out to block on a synchronization object (`why`, a `Switch::link`) while it
    /// unwinds a panic: its node becomes this OS thread's and is linked as such, and `t` is
    /// anchored to this thread, which waits for the node's notification before it resumes `t`
    /// (`crate::anchor`).
    #[cold]
    #[inline(never)]
    fn anchor_linker(&self, t: TcbRef, why: Switch) {
        // SAFETY: as for `link_after_switch` in `run_ult_as`: the ULT switched out with this link,
        // holding the object's lock, and stays switched out until it is anchored.
        let wait = unsafe { crate::sync::wait::anchor_link(why.at(), why.kind() == Switch::LINK_FRONT, t) };
        crate::blocking::switched(self, t, crate::blocking::CallRef::anchor(t, wait));
    }

    /// The direct hand-off: after a transition, the ULT in the `next` slot (the one the
    /// transition made ready: a woken receiver, a joiner, the next yielder in line) runs at once,
    /// without a round of the loop, when the loop would pick it anyway: no wake-up, clean-up note
    /// or timer waits, and this is not the 61st step in a row (then the loop runs, and with it
    /// the shutdown check and the shared start-queue levels). Never inside the join fast path,
    /// whose caller waits on this stack for its child's switch.
    #[inline(always)]
    fn hand_off(&self) -> Option<TcbRef> {
        let core = self.core();
        let n = self.peek_next()?;
        if core.step() || core.no_hand_off > 0 {
            return None; // (a join fast path waits below us; the chaos mode's loop picks at random)
        }
        if self.loop_has_errands() {
            return None;
        }
        if n.tcb().head.life.get() != Life::Started {
            return None; // (never in the slot today; the loop's dispatch starts such a one)
        }
        // (A thief may have taken it since the look: then the loop goes on. The caller makes
        // the tests the loop makes of the ULT it picks: `chosen`.)
        self.take_next()
    }

    /// The yield of `t` in a round-robin served from the yield batch, in one step: what
    /// `requeue_yielded` and `hand_off` would do when the batch holds a taken ULT (`t` takes its
    /// place, and it runs next), with their tests once each, except those of the loop's
    /// errands and the start-queues, made at the batch's first yield only (see below).
    /// [`FromBatch::Loop`] on the step that is the loop's turn (`t` is in the batch then, the
    /// ULT to run next in the `next` slot); [`FromBatch::Elsewhere`] (and nothing done) when
    /// they would do anything else.
    ///
    /// Wake-ups, clean-up notes, timers and start-queue entries are looked for at the yield that
    /// refilled the batch (`requeue_yielded`, `hand_off`) and at the batch's first yield, not at
    /// the six after it: what arrives meanwhile waits at most `BATCH` - 1 yields of ULTs of
    /// this processor (tens of nanoseconds) longer for the loop, or for its admission
    /// (`admit_one`). Those six loads of five lines are a sizeable share of a yield's
    /// instructions, the loop's shortest path (`hot_path_probe yields` counts them).
    /// Under No Affinity and Minimum Misses only (their yield key is always 0; the batch is
    /// never filled under the others, nor in the central or chaos mode).
    #[inline(always)]
    fn yield_from_batch(&self, t: TcbRef) -> FromBatch {
        let core = self.core();
        let Some(n) = core.batch.peek_taken() else {
            return FromBatch::Elsewhere;
        };
        // (`yield_at_zero` last: it does `yield_priority`'s bookkeeping.)
        if !self.next_is_empty()
            || core.no_hand_off > 0
            || (core.batch.at_first() && (self.loop_has_errands() || self.start_work_visible()))
            || n.tcb().head.life.get() != Life::Started
            || !core.engine.yield_at_zero()
        {
            return FromBatch::Elsewhere;
        }
        let Ok(n) = core.batch.swap(t) else {
            return FromBatch::Elsewhere; // (not reached: `n` was peeked)
        };
        if core.step() {
            self.put_next(n);
            return FromBatch::Loop;
        }
        FromBatch::Run(n) // (the caller tests it as after `hand_off`: `chosen`)
    }

    /// Whether a wake-up, a clean-up note or a timer waits for the loop: then the fast paths
    /// (`hand_off`, `yield_from_batch`) go back to it.
    #[inline(always)]
    fn loop_has_errands(&self) -> bool {
        let remote = self.remote();
        !remote.wakeup.is_empty() || !remote.cleanup.is_empty() || !self.core().timers.is_empty()
    }

    /// True when no ready ULT, wake-up, start-queue entry or timer waits here (the yield fast path).
    /// Only such a yield counts a step here; one that finds other work counts its step in
    /// [`Processor::hand_off`], so that every yield counts one and the loop's turn (every
    /// [`TICK_PERIOD`](super::TICK_PERIOD)-th step) is never spent on a yield that goes on to the hand-off anyway.
    #[inline(always)]
    fn nothing_else_local(&self) -> bool {
        let core = self.core();
        let alone = self.next_is_empty()
            && self.runq().len() == 0
            && core.batch.is_empty()
            && self.remote().wakeup.is_empty()
            && self.remote().start.is_empty()
            && core.timers.is_empty();
        // On the loop's turn the yielder is queued and the loop runs (shutdown, the shared levels).
        alone && !core.step()
    }

    /// A ULT yielded while other work waits: it goes behind the other ready ULTs (the policy's
    /// yield key) and one never-started ULT is admitted first.
    #[inline(always)]
    fn requeue_yielded(&self, t: TcbRef) {
        if self.chaos.on && self.chaos_migrate(t) {
            return;
        }
        let core = self.core();
        if let Some(n) = self.take_next() {
            self.make_ready(n);
        }
        let key = core.engine.yield_priority(t);
        if !self.central && self.next_is_empty() && !self.start_work_visible() {
            // Nothing to admit: queue `t` and take the best ready ULT; the best runs next.
            if key == 0 && !self.chaos.on && (!core.batch.is_empty() || self.runq().len() >= BATCH_FROM) {
                // The zero lane's round-robin (see `YieldBatch`): the batch's next ULT, without
                // the lock, or a refill under one acquisition. (A runqueue too short for a batch
                // takes the plain path below: fewer instructions.)
                let n = match core.batch.swap(t) {
                    Ok(n) => Some(n),
                    Err(t) => self.runq().yield_refill(t, &mut core.batch),
                };
                if let Some(n) = n {
                    self.put_next(n);
                }
                return;
            }
            // In one critical section (one lock round trip instead of two).
            self.flush_batch();
            if let Some(n) = self.runq().push_pop_best(key, t) {
                self.put_next(n);
            }
            return;
        }
        self.runq().push_flushing(key, t, &mut core.batch);
        core.admit_one = true;
    }

    /// A run of a ULT of group number `group` (not 0), begun at `began`, ended here; it ran
    /// elsewhere before when `migrated`. Counts it in the group's slot (`crate::group`).
    #[inline(never)]
    fn group_ran(&self, group: u16, began: Instant, migrated: bool) {
        self.shared.groups.slot(group).ran(self.index, began.elapsed(), migrated);
    }

    /// Checked after every switch out of a ULT on an unguarded stack.
    #[inline]
    fn check_canary(&self, t: TcbRef) {
        // SAFETY: the ULT just switched out, so its context is still in the TCB; only this
        // processor touches it.
        let at = unsafe { (*t.tcb().exec.context.get()).as_ref() }.map_or(0, |c| c.canary_at);
        // SAFETY: `at` is the low end of the ULT's unguarded stack (0: guarded), recorded when the
        // context was made; the context holds the stack, so the memory is live.
        if !unsafe { crate::stack::canary_intact_at(at) } {
            self.canary_overwritten(t);
        }
    }

    #[cold]
    fn canary_overwritten(&self, t: TcbRef) -> ! {
        let tcb = t.tcb();
        crate::fatal(&format!(
            "stack overflow in ULT {} ({}): the canary of its {}-byte unguarded stack was overwritten",
            tcb.head.id.get(),
            self.ult_name(t),
            tcb.stack_size()
        ));
    }

    fn ult_name(&self, t: TcbRef) -> String {
        // SAFETY: the name is written at spawn and immutable afterwards.
        unsafe { (*t.tcb().links.name.get()).as_deref().unwrap_or("unnamed").to_string() }
    }
}
