//! The co-scheduling algorithms (the seed's section IV) and the two baselines the experiment
//! compares them with: slots of one or two groups that run together, each slot for a quantum.

use super::Class;

/// A group as the planners see it: its index (the caller's), class, predicted cores and miss
/// intensity (memory bytes per second, for the miss-balancing baseline).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Member {
    /// The caller's index of the group.
    pub group: usize,
    /// Its class.
    pub class: Class,
    /// Its predicted core count (see [`predict_cores`](super::predict_cores)), at least 1.
    pub cores: usize,
    /// Its memory traffic in bytes per second (the miss-balancing baseline's key).
    pub intensity: f64,
}

/// One slot of a plan: the groups that run together for a quantum on one cache domain, each
/// with its core count (the counts add up to the domain's cores).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Slot {
    /// `(group, cores)` for each group of the slot: one or two entries.
    pub runs: Vec<(usize, usize)>,
}

impl Slot {
    fn alone(group: usize, cores: usize) -> Slot {
        Slot { runs: vec![(group, cores)] }
    }

    /// The groups of the slot.
    pub fn groups(&self) -> impl Iterator<Item = usize> + '_ {
        self.runs.iter().map(|&(g, _)| g)
    }
}

#[derive(Clone, Copy)]
struct Entry {
    m: Member,
    done: bool,
}

/// LCN's co-scheduling on a domain of `cores` cores.
///
/// Following the seed's algorithm: the groups are split into the four class lists, each sorted
/// by predicted cores (fewest first); every N group has its cores halved and enters its list
/// twice; then each N group in turn is paired with the last group that fits of C, L, LC, N (in
/// that order of search), each LC group with one of C, LC, each C group with a C group. A
/// pair's cores are raised equally until they fill the domain (the first group takes an odd
/// one). Groups left without a partner run alone on every core (the two entries of an unpaired
/// N group make one slot).
///
/// One departure from the seed's listing: its LC loop also searches L and its L loop pairs L
/// groups with each other, although its text says to avoid L–L and L–LC pairs; here no slot
/// ever holds L–L, L–LC or L–C ([`Class::may_pair`]), so an L group runs with an N group or
/// alone.
///
/// ```
/// use elite_rt::contention::{pair_lcn, Class, Member};
///
/// let m = |group, class, cores| Member { group, class, cores, intensity: 0.0 };
/// // A spin (N), a stream (L, one core), a stencil (C, two cores) on two cores.
/// let plan = pair_lcn(&[m(0, Class::N, 2), m(1, Class::L, 1), m(2, Class::C, 2)], 2);
/// let slots: Vec<Vec<(usize, usize)>> = plan.into_iter().map(|s| s.runs).collect();
/// assert_eq!(slots, [vec![(0, 1), (1, 1)], vec![(0, 2)], vec![(2, 2)]]);
/// ```
pub fn pair_lcn(members: &[Member], cores: usize) -> Vec<Slot> {
    let cores = cores.max(1);
    let mut lists: [Vec<Entry>; 4] = Default::default();
    for m in members {
        let mut m = *m;
        m.cores = m.cores.clamp(1, cores);
        let i = list_of(m.class);
        if m.class == Class::N {
            m.cores = (m.cores / 2).max(1);
            lists[i].push(Entry { m, done: false });
        }
        lists[i].push(Entry { m, done: false });
    }
    for list in &mut lists {
        list.sort_by_key(|e| (e.m.cores, e.m.group));
    }
    let mut slots = Vec::new();
    let mut left: Vec<usize> = Vec::new();
    let order: [(Class, &[Class]); 4] = [
        (Class::N, &[Class::C, Class::L, Class::LC, Class::N]),
        (Class::LC, &[Class::C, Class::LC]),
        (Class::L, &[]),
        (Class::C, &[Class::C]),
    ];
    for (class, search) in order {
        let li = list_of(class);
        for i in 0..lists[li].len() {
            if lists[li][i].done {
                continue;
            }
            lists[li][i].done = true;
            let x = lists[li][i].m;
            match pop_match_from_end(&mut lists, search, &x, cores) {
                Some(y) => slots.push(co_schedule(x, y, cores)),
                None => {
                    if !left.contains(&x.group) {
                        left.push(x.group);
                    }
                }
            }
        }
    }
    slots.extend(left.into_iter().map(|g| Slot::alone(g, cores)));
    slots
}

fn list_of(class: Class) -> usize {
    match class {
        Class::L => 0,
        Class::LC => 1,
        Class::C => 2,
        Class::N => 3,
    }
}

/// The seed's `popMatchFromTheEnd`: the last group of the first list (in `search` order) that
/// has one not yet scheduled, not `x`'s own group, whose cores fit beside `x`'s.
fn pop_match_from_end(
    lists: &mut [Vec<Entry>; 4],
    search: &[Class],
    x: &Member,
    cores: usize,
) -> Option<Member> {
    for &class in search {
        let list = &mut lists[list_of(class)];
        if let Some(e) =
            list.iter_mut().rev().find(|e| !e.done && e.m.group != x.group && e.m.cores + x.cores <= cores)
        {
            e.done = true;
            return Some(e.m);
        }
    }
    None
}

/// The seed's `coSchedule`: both groups' cores raised equally until they fill the domain.
fn co_schedule(x: Member, y: Member, cores: usize) -> Slot {
    debug_assert!(x.class.may_pair(y.class));
    let extra = cores.saturating_sub(x.cores + y.cores);
    let (a, b) = (x.cores + extra - extra / 2, y.cores + extra / 2);
    Slot { runs: vec![(x.group, a), (y.group, b)] }
}

/// Gang scheduling: every group alone on every core, in turn.
pub fn gang(members: &[Member], cores: usize) -> Vec<Slot> {
    members.iter().map(|m| Slot::alone(m.group, cores.max(1))).collect()
}

/// The miss-rate-balancing baseline (Blagodurov and Fedorova's Distributed Intensity, the
/// seed's LLC-MRB): the groups sorted by memory intensity, the most intense paired with the
/// least, the second with the second least, and so on, each pair splitting the cores in
/// proportion to the groups' predicted counts (at least one each); an odd group out runs alone.
/// It does not look at classes: two cache-bound groups (C) look as harmless as two compute
/// groups (N).
pub fn miss_balance(members: &[Member], cores: usize) -> Vec<Slot> {
    let cores = cores.max(1);
    let mut sorted: Vec<Member> = members.to_vec();
    sorted.sort_by(|a, b| b.intensity.total_cmp(&a.intensity).then(a.group.cmp(&b.group)));
    let mut slots = Vec::new();
    let (mut i, mut j) = (0, sorted.len());
    while i < j {
        if j - i == 1 || cores < 2 {
            slots.push(Slot::alone(sorted[i].group, cores));
            i += 1;
            continue;
        }
        let (x, y) = (sorted[i], sorted[j - 1]);
        let want = (x.cores + y.cores).max(1) as f64;
        let a = ((x.cores as f64 / want * cores as f64).round() as usize).clamp(1, cores - 1);
        slots.push(Slot { runs: vec![(x.group, a), (y.group, cores - a)] });
        i += 1;
        j -= 1;
    }
    slots
}
