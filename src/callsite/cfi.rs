//! A DWARF call-frame-information unwinder that remembers each return address's rule, for code
//! built without frame pointers (x86_64 Linux).
//!
//! The general unwinder (`backtrace`, that is libgcc's `_Unwind_Backtrace`) finds and interprets
//! the call-frame information of every frame anew: microseconds per capture. But a program
//! allocates from a bounded set of return addresses, and at a return address (just after a call)
//! nearly every function's rule has one shape: the caller's stack pointer (the *CFA*) is `rsp` or
//! `rbp` plus a constant, the return address is stored just below it, and `rbp` is either left
//! alone or saved at a constant offset from it. Such a rule packs into the word that also holds
//! its address, so after the first capture through an address, unwinding its frame is a table
//! lookup and two or three loads.
//!
//! A frame whose rule has another shape (a signal trampoline, a DWARF expression, a register kept
//! in another register), an address without call-frame information (generated code) and a stack
//! that looks wrong (a CFA outside the thread's stack or not above the frame) make [`walk`] give
//! up: the caller then uses the general unwinder, which handles them.
//!
//! Rules are found with `gimli`, without allocating, inside `dl_iterate_phdr`'s callback, which
//! glibc runs holding the loader's lock, so no library is unloaded while its tables are read (musl
//! releases its lock during the callback, but never unloads a library). That lock must not be held
//! by this process's other threads when it forks (the child could never take it again): one
//! lookup runs at a time, under `LOOKUP`, which the fork handlers (`fork.rs`) take. A thread that
//! finds it taken waits a bounded time (the holder may be waiting for the loader's lock, held by
//! this thread in a callback of its own that allocates), then sends that capture to the general
//! unwinder.
//!
//! Each thread also remembers its last walks ([`Memo`]), so that a stack met again is checked
//! rather than walked.
//!
//! A library unloaded leaves its rules in the table until the next lookup, which sees that the
//! loader's count of unloaded objects changed and empties the table (the walks remembered with
//! those rules are then forgotten too). Until then, another library loaded at the same addresses
//! can get wrong frames (never a read outside the thread's stack).

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use super::intern::hash_stack;
use super::loaded;

use gimli::{
    BaseAddresses, CfaRule, EhFrame, EhFrameHdr, NativeEndian, Pointer, Register, RegisterRule,
    UnwindContext, UnwindContextStorage, UnwindSection, UnwindTableRow, X86_64,
};

/// The registers a walk starts from: those of the function that called [`registers`], as they
/// are when the call returns.
#[repr(C)]
#[derive(Default)]
pub struct Registers {
    /// The return address into the calling function.
    ip: usize,
    /// The stack pointer after the return.
    sp: usize,
    /// The frame-pointer register (`rbp`), which the call leaves as it was.
    bp: usize,
}

/// The caller's registers as they will be when this call returns (it sets up no frame).
// SAFETY: the body follows the C calling convention the signature declares: it writes the three
// words of the `Registers` that `rdi` points to (the caller passes a valid, writable one), reads
// only the return address at `[rsp]`, changes no callee-saved register and returns.
#[unsafe(naked)]
pub extern "C" fn registers(out: &mut Registers) {
    std::arch::naked_asm!(
        "mov rax, [rsp]",
        "mov [rdi], rax",
        "lea rax, [rsp + 8]",
        "mov [rdi + 8], rax",
        "mov [rdi + 16], rbp",
        "ret",
    )
}

/// How to find a frame's caller from a return address into it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Rule {
    /// The CFA is `rbp` (`from_bp`) or `rsp` plus `cfa_words` words (at most `MAX_CFA_WORDS`);
    /// the return address is the word below it; `rbp` is saved `bp_words` words below it (at most
    /// `MAX_BP_WORDS`), or left alone when 0.
    Step {
        from_bp: bool,
        cfa_words: u32,
        bp_words: u8,
    },
    /// The frame has no caller: the outermost one (`_start`, a thread's `clone`).
    Outermost,
    /// The general unwinder must do it.
    Unknown,
}

/// Return addresses lie below 2^47 (x86_64 user space).
const ADDRESS_BITS: u32 = 47;
/// Sets of the rule table, picked by the low bits of the address.
const INDEX_BITS: u32 = 12;
const SETS: usize = 1 << INDEX_BITS;
/// Entries per set: addresses that share a set (as many do, among the few hundred a program
/// allocates from) take turns in it instead of pushing each other out at every capture.
const WAYS: usize = 4;
/// The rest of the address, which an entry keeps to tell the addresses of a set apart.
const TAG_BITS: u32 = ADDRESS_BITS - INDEX_BITS;
const FROM_BP_AT: u32 = TAG_BITS;
const CFA_AT: u32 = FROM_BP_AT + 1;
/// Frames up to 8 MiB.
const MAX_CFA_WORDS: u32 = (1 << 20) - 1;
const BP_AT: u32 = CFA_AT + 20;
/// `rbp` is pushed among the first callee-saved registers, a few words below the CFA.
const MAX_BP_WORDS: u8 = (1 << 7) - 1;
const PRESENT_AT: u32 = BP_AT + 7;
const _: () = assert!(PRESENT_AT == 63);

/// A set of the table: one cache line holds two.
#[repr(align(32))]
struct Set([AtomicU64; WAYS]);

/// Each entry: the address's tag (its bits above the index) in bits 0–34, `from_bp` in bit 35,
/// `cfa_words` in 36–55, `bp_words` in 56–62, and a set bit 63; with `cfa_words` 0, `from_bp` 0
/// means `Outermost` and 1 `Unknown`. Zero is no entry. One word, so readers on other threads see
/// an entry whole.
static RULES: [Set; SETS] = [const { Set([const { AtomicU64::new(0) }; WAYS]) }; SETS];

/// Picks the entry of a full set that a new rule replaces, in turn.
static VICTIM: AtomicUsize = AtomicUsize::new(0);

std::thread_local! {
    /// Rules this thread looked up in the loaded objects' tables (not found in `RULES`): for
    /// tests, which run side by side.
    static LOOKUPS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Held while a rule is looked up (see the module docs).
static LOOKUP: AtomicBool = AtomicBool::new(false);

/// How many times a thread tries to take `LOOKUP`, yielding between tries, before its capture
/// goes to the general unwinder: a lookup takes microseconds, so threads that start together
/// mostly wait for one another's, but one that holds the loader's lock itself (in a callback of
/// its own, which allocates) does not wait for ever on one that waits for that lock.
const LOOKUP_TRIES: u32 = 1000;

fn set(ip: usize) -> &'static Set {
    &RULES[ip % SETS]
}

fn tag(ip: usize) -> u64 {
    (ip >> INDEX_BITS) as u64
}

fn encode(ip: usize, rule: Rule) -> u64 {
    let (from_bp, cfa, bp) = match rule {
        Rule::Step {
            from_bp,
            cfa_words,
            bp_words,
        } => (from_bp, cfa_words, bp_words),
        Rule::Outermost => (false, 0, 0),
        Rule::Unknown => (true, 0, 0),
    };
    tag(ip)
        | u64::from(from_bp) << FROM_BP_AT
        | u64::from(cfa & MAX_CFA_WORDS) << CFA_AT
        | u64::from(bp & MAX_BP_WORDS) << BP_AT
        | 1 << PRESENT_AT
}

/// The rule in `entry` if it is the entry of `ip`.
fn decode(ip: usize, entry: u64) -> Option<Rule> {
    let tag_mask = (1 << TAG_BITS) - 1;
    if entry >> PRESENT_AT == 0 || entry & tag_mask != tag(ip) {
        return None;
    }
    let from_bp = entry >> FROM_BP_AT & 1 == 1;
    let cfa_words = (entry >> CFA_AT) as u32 & MAX_CFA_WORDS;
    Some(match (cfa_words, from_bp) {
        (0, false) => Rule::Outermost,
        (0, true) => Rule::Unknown,
        _ => Rule::Step {
            from_bp,
            cfa_words,
            bp_words: (entry >> BP_AT) as u8 & MAX_BP_WORDS,
        },
    })
}

/// The rule for return address `ip`, from the table or else found and remembered (`Unknown`,
/// not remembered, when another thread is looking one up).
fn rule_for(ip: usize) -> Rule {
    if ip >> ADDRESS_BITS != 0 {
        return Rule::Unknown;
    }
    let set = set(ip);
    for entry in &set.0 {
        if let Some(rule) = decode(ip, entry.load(Ordering::Relaxed)) {
            return rule;
        }
    }
    let Some(rule) = find_rule(ip) else {
        return Rule::Unknown;
    };
    let entry = match set.0.iter().find(|e| e.load(Ordering::Relaxed) == 0) {
        Some(empty) => empty,
        None => &set.0[VICTIM.fetch_add(1, Ordering::Relaxed) % WAYS],
    };
    entry.store(encode(ip, rule), Ordering::Relaxed);
    rule
}

/// How many rules the calling thread looked up in the loaded objects' tables so far.
pub fn rule_lookups() -> u64 {
    LOOKUPS.try_with(std::cell::Cell::get).unwrap_or(0)
}

/// How many times the rule table was emptied: a remembered walk (see `Memo`) made before holds
/// rules that may be gone.
static GENERATION: AtomicU64 = AtomicU64::new(0);

/// Empties the rule table, so that the next captures look their rules up again (and forget the
/// walks made with the old ones).
pub fn forget_rules() {
    GENERATION.fetch_add(1, Ordering::Relaxed);
    for set in &RULES {
        for entry in &set.0 {
            entry.store(0, Ordering::Relaxed);
        }
    }
}

/// Waits until no rule lookup runs and keeps new ones from starting: for the fork handlers, before
/// a fork. Undone by [`unlock_after_fork`].
pub fn lock_for_fork() {
    while LOOKUP
        .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
        .is_err()
    {
        std::thread::yield_now();
    }
}

/// Undoes [`lock_for_fork`], in the parent and in the child.
pub fn unlock_after_fork() {
    LOOKUP.store(false, Ordering::Release);
}

/// Walks the stack from `regs` (taken by [`registers`] in the calling function, which is still
/// running), writing the return addresses into `out` after dropping the first `drop` frames (the
/// first is that of the function that took `regs`); `stack` is the thread's `(low, high)` stack
/// bounds. Returns how many were written, or `None` when the general unwinder must do it (see the
/// module docs).
pub fn walk(
    regs: &Registers,
    stack: (usize, usize),
    out: &mut [usize],
    drop: usize,
) -> Option<usize> {
    walk_recording(regs, stack, out, drop, None)
}

/// `walk`, writing into `reads`, when given one, the stack words the result depends on: each
/// return address, and each saved `rbp` a CFA is computed from (see `Memo`); `reads.complete`
/// says whether they all fit.
fn walk_recording(
    regs: &Registers,
    stack: (usize, usize),
    out: &mut [usize],
    drop: usize,
    mut reads: Option<&mut Reads>,
) -> Option<usize> {
    let (low, high) = stack;
    let (mut ip, mut sp, mut bp) = (regs.ip, regs.sp, regs.bp);
    if !(low < sp && sp < high && sp % 8 == 0) {
        return None;
    }
    if let Some(r) = reads.as_deref_mut() {
        (r.n, r.n_bps, r.uses_bp, r.complete) = (0, 0, false, true);
    }
    // Where `bp` was last restored from, once it was.
    let mut bp_from: Option<usize> = None;
    let mut n = 0;
    let mut dropped = 0;
    loop {
        if dropped < drop {
            dropped += 1;
        } else {
            let Some(slot) = out.get_mut(n) else {
                return Some(n);
            };
            *slot = ip;
            n += 1;
            // Full: what the frame's caller is does not matter.
            if n == out.len() {
                return Some(n);
            }
        }
        let (from_bp, cfa_words, bp_words) = match rule_for(ip) {
            Rule::Step {
                from_bp,
                cfa_words,
                bp_words,
            } => (from_bp, cfa_words, bp_words),
            Rule::Outermost => return Some(n),
            Rule::Unknown => return None,
        };
        let base = if from_bp { bp } else { sp };
        let cfa = base.checked_add(cfa_words as usize * 8)?;
        // The words read below lie between `sp` and `cfa`, inside the thread's stack.
        let saved_bp = cfa.checked_sub(usize::from(bp_words) * 8)?;
        if cfa <= sp || cfa > high || cfa % 8 != 0 || saved_bp < sp {
            return None;
        }
        // SAFETY: `sp` and `cfa` are 8-aligned (every `sp` is the first one or an earlier `cfa`)
        // and `sp < cfa <= high`, so `cfa - 8` is an aligned word in `[sp, high)`: this thread's
        // stack, mapped while the thread runs, at or above the current frame.
        let ra = unsafe { ((cfa - 8) as *const usize).read() };
        if let Some(r) = reads.as_deref_mut() {
            // The walk depends on the value of `bp` only where a CFA is computed from it: that
            // value, and where it was read, are then part of what the walk read.
            if from_bp {
                match bp_from {
                    None => r.uses_bp = true,
                    // Once per saved value, however many frames compute a CFA from it.
                    Some(at) if r.n_bps > 0 && r.bps.get(r.n_bps - 1) == Some(&(at, bp)) => {}
                    Some(at) => r.complete &= push(&mut r.bps, &mut r.n_bps, (at, bp)),
                }
            }
            r.complete &= push(&mut r.ras, &mut r.n, (cfa - 8, ra));
            if !r.complete {
                reads = None;
            }
        }
        if bp_words != 0 {
            // SAFETY: as above: `saved_bp`, `cfa` less a whole number of words, is aligned, at
            // least `sp` (checked above) and below `cfa`, so within `[sp, high)`.
            bp = unsafe { (saved_bp as *const usize).read() };
            bp_from = Some(saved_bp);
        }
        sp = cfa;
        ip = ra;
        if ip < 4096 {
            return Some(n);
        }
    }
}

/// Appends `word` to `words[..*n]`; whether there was room.
fn push(words: &mut [(usize, usize)], n: &mut usize, word: (usize, usize)) -> bool {
    match words.get_mut(*n) {
        Some(slot) => {
            *slot = word;
            *n += 1;
            true
        }
        None => false,
    }
}

/// Frames a remembered walk may read: a capture's deepest plus those it drops.
const REMEMBERED_FRAMES: usize = super::STACK_WORDS + 8;

/// Saved `rbp` values a remembered walk may compute CFAs from: code without frame pointers
/// rarely does, but libraries built with them (a distribution's C libraries) do at every frame.
const BP_READS: usize = 32;

/// What one walk read from the stack, as (address, word) pairs: the return address of each frame
/// (`ras[..n]`), and the saved `rbp` values a CFA was computed from (`bps[..n_bps]`); whether it
/// used the `rbp` it started from; all of it only if `complete`.
struct Reads {
    n: usize,
    n_bps: usize,
    uses_bp: bool,
    complete: bool,
    ras: [(usize, usize); REMEMBERED_FRAMES],
    bps: [(usize, usize); BP_READS],
}

/// A walk remembered, with where it started.
struct Remembered {
    /// Whether the rest holds a complete walk.
    valid: bool,
    regs: Registers,
    drop: usize,
    depth: usize,
    /// Return addresses written, and their `hash_stack`.
    n: usize,
    hash: u64,
    /// Their site, once named (`Memo::name_last`; 0: not yet).
    site: u32,
    /// `GENERATION` when the walk began.
    generation: u64,
    reads: Reads,
}

/// Walks a thread remembers: more than the places a loop usually allocates from in turn (about
/// 1.7 KiB each).
const REMEMBERED: usize = 32;

/// What the search for a remembered walk reads of each, side by side so that it reads little:
/// where the walk started, and its first check (see `Memo::holding`). All zero (an `ip` no walk
/// starts from) for a walk that is not valid.
#[derive(Clone, Copy)]
struct Brief {
    ip: usize,
    sp: usize,
    /// Where the return address into the calling function was read, and what it was.
    first_at: usize,
    first: usize,
    /// The same for the next return address read (or the first again, when the walk read no
    /// more): places that reach the allocator through one function share the first (a review:
    /// sixteen places in no order through `__rust_alloc`'s stand-in measured 5.1× `System`
    /// without frame pointers, each capture checking the walks of the others in full).
    second_at: usize,
    second: usize,
}

/// The last walks of a thread (kept in its capture buffer), so that a stack met again is not
/// walked again. A walk is a function of the registers it starts from, the rules of the addresses
/// it meets (a function of the address) and the words it reads from the stack: when it starts
/// from the same registers (`rbp` only if it used it before reloading it) and every word it read
/// still holds the same value, it would return the same stack. Those words are known in advance,
/// so checking them takes loads that do not wait for one another, where the walk's each wait for
/// the one before. Most allocations come from places that take turns, so the walk that followed
/// the last one the time before is checked first; then those that start from the same registers
/// and whose first word holds. Valid as all zero bytes: empty.
pub struct Memo {
    walks: [Remembered; REMEMBERED],
    briefs: [Brief; REMEMBERED],
    /// For each walk, when it was last given (`clock` then; 0: never given, or its walk could not
    /// be remembered), so that a new walk takes the place of the one used longest ago.
    used: [u64; REMEMBERED],
    /// Walks given so far.
    clock: u64,
    /// For each walk, the walk given right after it the last time.
    after: [u8; REMEMBERED],
    /// The walk given last.
    last: u8,
    /// Whether `named_site` found that the guess does not hold, which the capture that follows
    /// it need not check again (cleared by `walk_remembered`).
    guess_failed: bool,
    /// Not `Send`: the words remembered are addresses in the stack of the thread that walked it,
    /// which `holding` reads.
    thread: std::marker::PhantomData<*const ()>,
}

impl Memo {
    /// No walk remembered (as are all zero bytes).
    #[cfg(test)]
    pub const EMPTY: Memo = Memo {
        walks: [const {
            Remembered {
                valid: false,
                regs: Registers {
                    ip: 0,
                    sp: 0,
                    bp: 0,
                },
                drop: 0,
                depth: 0,
                n: 0,
                hash: 0,
                site: 0,
                generation: 0,
                reads: Reads {
                    n: 0,
                    n_bps: 0,
                    uses_bp: false,
                    complete: false,
                    ras: [(0, 0); REMEMBERED_FRAMES],
                    bps: [(0, 0); BP_READS],
                },
            }
        }; REMEMBERED],
        briefs: [Brief {
            ip: 0,
            sp: 0,
            first_at: 0,
            first: 0,
            second_at: 0,
            second: 0,
        }; REMEMBERED],
        used: [0; REMEMBERED],
        clock: 0,
        after: [0; REMEMBERED],
        last: 0,
        guess_failed: false,
        thread: std::marker::PhantomData,
    };

    /// Makes walk `i` the most recently used, and the one that followed the last.
    fn given(&mut self, i: u8) {
        self.clock += 1;
        if let Some(used) = self.used.get_mut(usize::from(i)) {
            *used = self.clock;
        }
        if let Some(after) = self.after.get_mut(usize::from(self.last)) {
            *after = i;
        }
        self.last = i;
    }

    /// The site of the stack a walk from `regs` would give (at most `depth` frames, `drop`
    /// dropped), when it is the one the walk that followed the last one the time before gave, and
    /// its site is named; `None` otherwise, changing nothing. A check of the remembered words only,
    /// which neither allocates nor calls out.
    #[inline(always)]
    pub fn named_site(&mut self, regs: &Registers, depth: usize, drop: usize) -> Option<u32> {
        let guess = self.after.get(usize::from(self.last)).copied().unwrap_or(0);
        let held = self.holding(guess, regs, depth, drop).map(|w| w.site);
        self.guess_failed = held.is_none();
        let site = held?;
        if site == 0 {
            return None;
        }
        self.given(guess);
        Some(site)
    }

    /// Walk `i`, if it starts from `regs` with the same depth and drop, and every word it read
    /// still holds.
    #[inline(always)]
    fn holding(&self, i: u8, regs: &Registers, depth: usize, drop: usize) -> Option<&Remembered> {
        let w = self.walks.get(usize::from(i))?;
        let same_start = w.valid
            && w.generation == GENERATION.load(Ordering::Relaxed)
            && w.regs.ip == regs.ip
            && w.regs.sp == regs.sp
            && (!w.reads.uses_bp || w.regs.bp == regs.bp)
            && w.drop == drop
            && w.depth == depth;
        if !same_start {
            return None;
        }
        // The return address into the calling function, which tells most places apart, first
        // (a walk that ended before it wrote a frame has none).
        let &(first_at, first) = w.reads.ras.get(..w.reads.n)?.get(drop.checked_sub(1)?)?;
        // SAFETY: a valid remembered walk ran on this thread (a memo is not `Send`: each lives in
        // its thread's capture buffer, freed when the thread exits) and read only aligned words
        // at or above the stack pointer it started from and below the top of the thread's stack
        // (`walk` checks both bounds), `first_at` among them (`ras[..n]`). That range of the
        // thread's stack stays mapped while the thread lives, whatever runs in it now.
        if unsafe { (first_at as *const usize).read() } != first {
            return None;
        }
        // SAFETY: as above.
        if !unsafe { still_holds(&w.reads) } {
            return None;
        }
        Some(w)
    }

    /// The stack of walk `i` into `out` (`drop` frames dropped), with its hash, if it starts
    /// from `regs` and every word it read still holds.
    fn replay(&self, i: u8, regs: &Registers, out: &mut [usize], drop: usize) -> Option<Walked> {
        let w = self.holding(i, regs, out.len(), drop)?;
        // A stack whose site is known need not be written out.
        if w.site == 0 {
            // The return address read at frame `k` is where frame `k + 1` runs.
            let frames = w.reads.ras.iter().skip(drop - 1).map(|&(_, ra)| ra);
            for (slot, ip) in out.iter_mut().zip(frames).take(w.n) {
                *slot = ip;
            }
        }
        Some(Walked {
            n: w.n,
            hash: w.hash,
            replayed: true,
            remembered: true,
            site: w.site,
        })
    }

    /// Names the site of the walk given last, for its next replays (see [`Walked`]).
    pub fn name_last(&mut self, site: u32) {
        if let Some(w) = self.walks.get_mut(usize::from(self.last)) {
            w.site = site;
        }
    }
}

/// What [`walk_remembered`] gave.
pub struct Walked {
    /// Return addresses written.
    pub n: usize,
    /// Their `intern::hash_stack`.
    pub hash: u64,
    /// Whether the walk was spared.
    pub replayed: bool,
    /// Whether the stack is now the memo's last walk (replayed, or walked and remembered), whose
    /// site [`Memo::name_last`] then sets.
    pub remembered: bool,
    /// The site named for the stack (0: none yet; otherwise the return addresses were not
    /// written).
    pub site: u32,
}

/// `walk`, with the hash of the stack (`intern::hash_stack`), or, for a stack `memo` remembers,
/// both without walking (see [`Walked`]).
pub fn walk_remembered(
    memo: &mut Memo,
    regs: &Registers,
    stack: (usize, usize),
    out: &mut [usize],
    drop: usize,
) -> Option<Walked> {
    // Every word such a walk reads fits in `Reads` (one per frame but the last), and the first
    // address written is one it read (not the one it started from).
    if drop == 0
        || drop
            .checked_add(out.len())
            .is_none_or(|f| f > REMEMBERED_FRAMES)
    {
        return walk(regs, stack, out, drop).map(|n| hashed(out, n));
    }
    let guess = memo.after.get(usize::from(memo.last)).copied().unwrap_or(0);
    if !std::mem::take(&mut memo.guess_failed) {
        if let Some(walked) = memo.replay(guess, regs, out, drop) {
            memo.given(guess);
            return Some(walked);
        }
    }
    walk_remembering(memo, guess, regs, stack, out, drop)
}

/// `walk_remembered` once the guess failed: the other remembered walks that start from `regs` and
/// whose first word still holds, then a walk, remembered in the place of the one given longest
/// ago. A function of its own, so that the guess's path
/// saves only the registers it uses.
#[inline(never)]
fn walk_remembering(
    memo: &mut Memo,
    guess: u8,
    regs: &Registers,
    stack: (usize, usize),
    out: &mut [usize],
    drop: usize,
) -> Option<Walked> {
    for i in 0..REMEMBERED as u8 {
        let Some(b) = memo.briefs.get(usize::from(i)) else {
            break;
        };
        if b.ip != regs.ip || b.sp != regs.sp || i == guess {
            continue;
        }
        // SAFETY: a brief is zeroed before its walk's slot is reused and set only once a
        // complete, valid walk of this thread is remembered there (below), from that walk's own
        // reads; a zero brief matches no registers (no walk starts from `ip` 0). So `first_at` is
        // an aligned word this thread's walk read between its stack pointer, which is `regs.sp`,
        // and the top of its stack: mapped while the thread lives (the memo is not `Send`).
        if unsafe { (b.first_at as *const usize).read() } != b.first {
            continue;
        }
        // SAFETY: as for `first_at`: `second_at` is another word the same walk read.
        if unsafe { (b.second_at as *const usize).read() } != b.second {
            continue;
        }
        if let Some(walked) = memo.replay(i, regs, out, drop) {
            memo.given(i);
            return Some(walked);
        }
    }
    let oldest = (0..REMEMBERED as u8)
        .min_by_key(|&i| memo.used.get(usize::from(i)))
        .unwrap_or(0);
    let (Some(w), Some(brief)) = (
        memo.walks.get_mut(usize::from(oldest)),
        memo.briefs.get_mut(usize::from(oldest)),
    ) else {
        return walk(regs, stack, out, drop).map(|n| hashed(out, n));
    };
    *brief = Brief {
        ip: 0,
        sp: 0,
        first_at: 0,
        first: 0,
        second_at: 0,
        second: 0,
    };
    w.valid = false;
    w.site = 0;
    w.generation = GENERATION.load(Ordering::Relaxed);
    let n = walk_recording(regs, stack, out, drop, Some(&mut w.reads))?;
    // (A walk that stopped before it wrote a frame read fewer words than it dropped.)
    w.valid = w.reads.complete && (n == 0 || n + drop - 1 <= w.reads.n);
    w.regs = Registers {
        ip: regs.ip,
        sp: regs.sp,
        bp: regs.bp,
    };
    w.drop = drop;
    w.depth = out.len();
    let read = |k: usize| w.reads.ras.get(..w.reads.n)?.get(k).copied();
    if let Some((first_at, first)) = drop.checked_sub(1).and_then(read) {
        let (second_at, second) = read(drop).unwrap_or((first_at, first));
        if w.valid {
            *brief = Brief {
                ip: regs.ip,
                sp: regs.sp,
                first_at,
                first,
                second_at,
                second,
            };
        }
    }
    let mut captured = hashed(out, n);
    (w.n, w.hash) = (captured.n, captured.hash);
    captured.remembered = w.valid;
    memo.given(oldest);
    if !captured.remembered {
        // The next walk takes this place again: a stack that cannot be remembered (more saved
        // `rbp` reads than `BP_READS`) would otherwise push out a remembered walk at every capture.
        if let Some(used) = memo.used.get_mut(usize::from(oldest)) {
            *used = 0;
        }
    }
    Some(captured)
}

/// What a walk that wrote `out[..n]` gives, not remembered.
pub fn hashed(out: &[usize], n: usize) -> Walked {
    Walked {
        n,
        hash: hash_stack(out.get(..n).unwrap_or(&[])),
        replayed: false,
        remembered: false,
        site: 0,
    }
}

/// Whether every word in `reads` still holds what the walk read.
///
/// # Safety
/// Every address in `reads` must be an aligned word of the calling thread's stack (within its
/// bounds, not necessarily in a frame that is running now).
unsafe fn still_holds(reads: &Reads) -> bool {
    let (Some(ras), Some(bps)) = (reads.ras.get(..reads.n), reads.bps.get(..reads.n_bps)) else {
        return false;
    };
    let differs = |words: &[(usize, usize)]| {
        words.iter().fold(0, |diff, &(at, word)| {
            // SAFETY: the caller's contract.
            diff | (unsafe { (at as *const usize).read() } ^ word)
        }) != 0
    };
    // Eight words at a time: a remembered walk of another call path parts from this one a few
    // frames in, where checking it can stop.
    !(ras.chunks(8).any(differs) || differs(bps))
}

/// Storage for the unwind-table evaluation on the stack (about 2.5 KiB), so that finding a rule
/// allocates nothing: x86_64 code gives rules for its 16 general registers and the return
/// address. Of the three rows, one holds the current rules, and the others a
/// `DW_CFA_remember_state` (compilers emit it around an early return in the middle of a
/// function, one deep) or the CIE's initial rules when it sets more than one; a function that
/// needs more is left to the general unwinder (gimli returns an error).
struct OnStack;

impl<T: gimli::ReaderOffset> UnwindContextStorage<T> for OnStack {
    type Rules = [(Register, RegisterRule<T>); 24];
    type Stack = [UnwindTableRow<T, Self>; 3];
}

/// What `dl_iterate_phdr`'s callback is asked and answers.
struct Search {
    ip: usize,
    rule: Rule,
    /// How many objects the process has unloaded so far, if the loader says.
    unloaded: Option<u64>,
}

/// `Search::unloaded` at the last lookup: when it changes, the table is emptied (see the module
/// docs).
static UNLOADED: AtomicU64 = AtomicU64::new(0);

/// Finds the rule for return address `ip` in the call-frame information of the loaded object
/// that holds it; `None` when another thread's lookup (or a fork) kept `LOOKUP` for longer than
/// `LOOKUP_TRIES` turns.
#[cold]
#[inline(never)]
fn find_rule(ip: usize) -> Option<Rule> {
    crate::fork::install();
    let mut tries = 0;
    while LOOKUP
        .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
        .is_err()
    {
        tries += 1;
        if tries == LOOKUP_TRIES {
            return None;
        }
        std::thread::yield_now();
    }
    let _ = LOOKUPS.try_with(|n| n.set(n.get().wrapping_add(1)));
    let mut search = Search {
        ip,
        rule: Rule::Unknown,
        unloaded: None,
    };
    // SAFETY: `callback` has the signature `dl_iterate_phdr` expects and only uses `data` as the
    // `Search` passed here, which outlives the call.
    unsafe {
        libc::dl_iterate_phdr(
            Some(callback),
            (&mut search as *mut Search).cast::<libc::c_void>(),
        );
    }
    if let Some(unloaded) = search.unloaded {
        if UNLOADED.swap(unloaded, Ordering::Relaxed) != unloaded {
            forget_rules();
        }
    }
    LOOKUP.store(false, Ordering::Release);
    Some(search.rule)
}

/// `dl_iterate_phdr`'s callback: for the object whose loaded segments hold the address, reads
/// the rule from its `.eh_frame_hdr` and `.eh_frame` (while the loader's lock keeps it loaded)
/// and stops the iteration (non-zero).
unsafe extern "C" fn callback(
    info: *mut libc::dl_phdr_info,
    size: libc::size_t,
    data: *mut libc::c_void,
) -> libc::c_int {
    // SAFETY: `data` is the `Search` `find_rule` passed, and `info` describes a loaded object
    // whose `dlpi_phnum` program headers start at `dlpi_phdr`, as `dl_iterate_phdr` guarantees;
    // its first `size` bytes are filled in.
    let (search, info) = unsafe { (&mut *data.cast::<Search>(), &*info) };
    let subs_end = std::mem::offset_of!(libc::dl_phdr_info, dlpi_subs) + 8;
    if search.unloaded.is_none() && size >= subs_end {
        search.unloaded = Some(info.dlpi_subs);
    }
    // SAFETY: `info` is what `dl_iterate_phdr` passed to this callback, read during it.
    let phdrs = unsafe { loaded::program_headers(info) };
    let base = info.dlpi_addr as usize;
    let loads = loaded::load_segments(phdrs, base);
    if !loads
        .clone()
        .any(|(start, end)| (start..end).contains(&search.ip))
    {
        return 0;
    }
    let frame_end = |at: usize| {
        loads
            .clone()
            .find(|(start, end)| (*start..*end).contains(&at))
            .map(|(_, end)| end)
    };
    let hdr = phdrs.iter().find(|p| p.p_type == libc::PT_GNU_EH_FRAME);
    if let Some((start, end)) = hdr.map(|p| loaded::segment(base, p)) {
        if frame_end(start).is_some_and(|load_end| end <= load_end) {
            // SAFETY: the `PT_GNU_EH_FRAME` segment lies inside a loaded segment (checked above),
            // mapped and readable, and it stays so while the loader's lock is held (for the rest
            // of this callback; musl, which releases it, never unloads an object).
            let hdr = unsafe { std::slice::from_raw_parts(start as *const u8, end - start) };
            search.rule = rule_in(search.ip, hdr, start, frame_end);
        }
    }
    1
}

/// The rule for return address `ip` from the object's `.eh_frame_hdr` section (`hdr`, at
/// address `hdr_at`); `frame_end` gives the end of the loaded segment that holds an address (the
/// `.eh_frame` section), if any does.
fn rule_in(
    ip: usize,
    hdr: &[u8],
    hdr_at: usize,
    frame_end: impl Fn(usize) -> Option<usize>,
) -> Rule {
    let bases = BaseAddresses::default().set_eh_frame_hdr(hdr_at as u64);
    let Ok(parsed) = EhFrameHdr::new(hdr, NativeEndian).parse(&bases, 8) else {
        return Rule::Unknown;
    };
    let Pointer::Direct(frame_at) = parsed.eh_frame_ptr() else {
        return Rule::Unknown;
    };
    let frame_at = frame_at as usize;
    let Some(end) = frame_end(frame_at) else {
        return Rule::Unknown;
    };
    // SAFETY: `.eh_frame` lies in a loaded segment of the object (`frame_end` says which), mapped
    // and readable to the segment's end while the loader's lock is held (see above); the parser
    // reads no further than its length fields say, within that.
    let frame = unsafe { std::slice::from_raw_parts(frame_at as *const u8, end - frame_at) };
    let frame = EhFrame::new(frame, NativeEndian);
    let bases = bases.set_eh_frame(frame_at as u64);
    let Some(table) = parsed.table() else {
        return Rule::Unknown;
    };
    // The call instruction's address, inside the caller even when the call is its last one.
    let at = ip.saturating_sub(1) as u64;
    let Ok(fde) = table.fde_for_address(&frame, &bases, at, EhFrame::cie_from_offset) else {
        return Rule::Unknown;
    };
    if fde.cie().is_signal_trampoline() || fde.cie().return_address_register() != X86_64::RA {
        return Rule::Unknown;
    }
    let mut ctx = UnwindContext::<_, OnStack>::new_in();
    let Ok(row) = fde.unwind_info_for_address(&frame, &bases, &mut ctx, at) else {
        return Rule::Unknown;
    };
    rule_of(
        row.cfa(),
        row.register(X86_64::RA),
        row.register(X86_64::RBP),
    )
}

/// The rule a row of the unwind table gives, from its CFA rule and those of the return address
/// and `rbp` (`None`: the default, left alone).
fn rule_of<T: gimli::ReaderOffset>(
    cfa: &CfaRule<T>,
    ra: Option<RegisterRule<T>>,
    bp: Option<RegisterRule<T>>,
) -> Rule {
    match ra {
        Some(RegisterRule::Offset(-8)) => {}
        Some(RegisterRule::Undefined) => return Rule::Outermost,
        _ => return Rule::Unknown,
    }
    let (from_bp, offset) = match *cfa {
        CfaRule::RegisterAndOffset { register, offset } if register == X86_64::RSP => {
            (false, offset)
        }
        CfaRule::RegisterAndOffset { register, offset } if register == X86_64::RBP => {
            (true, offset)
        }
        _ => return Rule::Unknown,
    };
    let Some(cfa_words) = words(offset, MAX_CFA_WORDS) else {
        return Rule::Unknown;
    };
    let bp_words = match bp {
        None | Some(RegisterRule::SameValue) => 0,
        Some(RegisterRule::Offset(offset)) => match offset
            .checked_neg()
            .and_then(|bytes| words(bytes, u32::from(MAX_BP_WORDS)))
        {
            Some(w) => w as u8,
            None => return Rule::Unknown,
        },
        Some(_) => return Rule::Unknown,
    };
    Rule::Step {
        from_bp,
        cfa_words,
        bp_words,
    }
}

/// `bytes` as a number of words from 1 to `max`, if it is one.
fn words(bytes: i64, max: u32) -> Option<u32> {
    if bytes <= 0 || bytes % 8 != 0 {
        return None;
    }
    u32::try_from(bytes / 8).ok().filter(|&w| w <= max)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::callsite::capture::stack_bounds;
    use std::cell::Cell;

    /// A stack by `walk_remembered` (and its hash), and by `walk`.
    type Both = (Option<(Vec<usize>, u64)>, Option<Vec<usize>>);

    std::thread_local! {
        /// Walks `walk_remembered` gave without walking, on this thread.
        static REPLAYED: Cell<u64> = const { Cell::new(0) };
    }

    /// The stack above this function's caller by `walk_remembered` with `memo` (and its hash),
    /// and by `walk`.
    #[inline(never)]
    fn remembered_and_walked(memo: &mut Memo) -> Both {
        let mut regs = Registers::default();
        registers(&mut regs);
        let mut out = [0usize; 48];
        let remembered = walk_remembered(memo, &regs, stack_bounds(), &mut out, 2).map(|w| {
            REPLAYED.with(|r| r.set(r.get() + u64::from(w.replayed)));
            (out[..w.n].to_vec(), w.hash)
        });
        let mut regs = Registers::default();
        registers(&mut regs);
        let mut out = [0usize; 48];
        let walked = walk(&regs, stack_bounds(), &mut out, 2).map(|n| out[..n].to_vec());
        (remembered, walked)
    }

    #[inline(never)]
    fn from_one_caller(memo: &mut Memo) -> Both {
        std::hint::black_box(remembered_and_walked(memo))
    }

    #[inline(never)]
    fn from_another_caller(memo: &mut Memo) -> Both {
        std::hint::black_box(remembered_and_walked(memo))
    }

    fn assert_same((remembered, walked): Both) {
        let (remembered, hash) = remembered.expect("remembered walk");
        assert_eq!(Some(&remembered), walked.as_ref());
        assert_eq!(hash, hash_stack(&remembered));
    }

    #[test]
    fn a_stack_met_again_is_given_without_walking_and_as_walked() {
        let mut memo = Box::new(Memo::EMPTY);
        let before = REPLAYED.with(Cell::get);
        for _ in 0..std::hint::black_box(3) {
            assert_same(from_one_caller(&mut memo));
        }
        assert_eq!(REPLAYED.with(Cell::get) - before, 2);
    }

    /// What `Memo::named_site` gives for the stack above this function's caller; when it gives
    /// nothing, the stack is walked (or replayed) as a capture would, and named `site`.
    #[inline(never)]
    fn named_or_walked(memo: &mut Memo, site: u32) -> Option<u32> {
        let mut regs = Registers::default();
        registers(&mut regs);
        let named = memo.named_site(&regs, 48, 2);
        if named.is_none() {
            let mut out = [0usize; 48];
            let walked = walk_remembered(memo, &regs, stack_bounds(), &mut out, 2);
            assert!(walked.is_some_and(|w| w.remembered));
            memo.name_last(site);
        }
        named
    }

    #[inline(never)]
    fn named_from_one_caller(memo: &mut Memo) -> Option<u32> {
        std::hint::black_box(named_or_walked(memo, 1))
    }

    #[inline(never)]
    fn named_from_another_caller(memo: &mut Memo) -> Option<u32> {
        std::hint::black_box(named_or_walked(memo, 2))
    }

    #[test]
    fn a_named_stack_met_again_is_given_by_its_site_once_it_is_the_guess() {
        let mut memo = Box::new(Memo::EMPTY);
        // Walked and named (the first walk is remembered where an empty memo's guess points);
        // then given as the guess.
        let sites: Vec<_> = (0..4).map(|_| named_from_one_caller(&mut memo)).collect();
        assert_eq!(sites, [None, Some(1), Some(1), Some(1)]);
    }

    #[test]
    fn named_sites_of_callers_taking_turns_are_never_swapped() {
        let mut memo = Box::new(Memo::EMPTY);
        let rounds: Vec<[Option<u32>; 2]> = (0..std::hint::black_box(4))
            .map(|_| {
                let one = named_from_one_caller(&mut memo);
                [one, named_from_another_caller(&mut memo)]
            })
            .collect();
        for round in &rounds {
            assert!(round[0].is_none_or(|s| s == 1) && round[1].is_none_or(|s| s == 2));
        }
        // Once the turns have been seen, each stack is the guess.
        assert_eq!(rounds[2..], [[Some(1), Some(2)]; 2]);
    }

    /// Three rounds of a capture through `one` then through `another`, each checked against a
    /// walk; returns how many were given without walking.
    fn replays_taking_turns(one: fn(&mut Memo) -> Both, another: fn(&mut Memo) -> Both) -> u64 {
        let mut memo = Box::new(Memo::EMPTY);
        let before = REPLAYED.with(Cell::get);
        for _ in 0..std::hint::black_box(3) {
            assert_same(one(&mut memo));
            assert_same(another(&mut memo));
        }
        REPLAYED.with(Cell::get) - before
    }

    #[test]
    fn stacks_of_two_callers_at_the_same_depth_are_told_apart() {
        // Both remembered after their first walk.
        assert_eq!(
            replays_taking_turns(from_one_caller, from_another_caller),
            4
        );
    }

    #[test]
    fn stacks_that_cannot_be_remembered_do_not_push_out_those_that_are() {
        // Without frame pointers no frame reads a saved `rbp`, and the deep stack below is
        // remembered: there is no stack here that cannot be.
        if !crate::callsite::capture::frame_pointers_present() {
            return;
        }
        let mut memo = Box::new(Memo::EMPTY);
        // (One loop, so that both rounds capture from the same places.)
        let mut replayed = Vec::new();
        for round in 0..std::hint::black_box(2) {
            if round == 1 {
                // Forty frames deeper: more saved `rbp` reads than a walk can remember, so each
                // is walked.
                for _ in 0..REMEMBERED + 1 {
                    assert_same(nested_remembered(40, &mut memo));
                }
            }
            let before = REPLAYED.with(Cell::get);
            assert_same(from_one_caller(&mut memo));
            assert_same(from_another_caller(&mut memo));
            replayed.push(REPLAYED.with(Cell::get) - before);
        }
        assert_eq!(replayed, [0, 2]);
    }

    #[test]
    fn more_stacks_than_remembered_walks_are_still_right() {
        let mut memo = Box::new(Memo::EMPTY);
        // (Path, whether given without walking), all from one call and at one depth, so that
        // the stacks start from the same registers and part only further down: as many stacks
        // as are remembered are given again without walking; one more takes the place of the
        // one used longest ago, which is then walked again.
        let r = REMEMBERED;
        let first = (0..r).map(|path| (path, 0));
        let again = (0..r).map(|path| (path, 1));
        let then = [(r, 0), (0, 0), (r - 1, 1), (r, 1)];
        for (path, expected) in first.chain(again).chain(then) {
            assert_eq!(replayed(&mut memo, path), expected, "path {path}");
        }
    }

    /// Checks the stack of `path` (see `on_path`) against a walk; returns whether it was
    /// replayed.
    #[inline(never)]
    fn replayed(memo: &mut Memo, path: usize) -> u64 {
        let before = REPLAYED.with(Cell::get);
        assert_same(on_path::<0>(path, PATH_LEVELS, memo));
        REPLAYED.with(Cell::get) - before
    }

    /// Calls below which `on_path` captures: the paths tell `2^PATH_LEVELS` stacks apart.
    const PATH_LEVELS: u32 = 6;

    /// `remembered_and_walked` below `level` more calls, each made from `on_path::<0>` or
    /// `on_path::<1>` as the bits of `path` say, from the lowest.
    #[inline(never)]
    fn on_path<const SIDE: usize>(path: usize, level: u32, memo: &mut Memo) -> Both {
        std::hint::black_box(SIDE);
        let r = match (level, path & 1) {
            (0, _) => remembered_and_walked(memo),
            (_, 0) => on_path::<0>(path >> 1, level - 1, memo),
            _ => on_path::<1>(path >> 1, level - 1, memo),
        };
        std::hint::black_box(r)
    }

    /// `remembered_and_walked` below twelve frames of recursion, from one of two callers.
    #[inline(never)]
    fn deep_from_one_caller(memo: &mut Memo) -> Both {
        std::hint::black_box(nested_remembered(12, memo))
    }

    #[inline(never)]
    fn deep_from_another_caller(memo: &mut Memo) -> Both {
        std::hint::black_box(nested_remembered(12, memo))
    }

    #[test]
    fn stacks_that_part_only_deep_down_are_told_apart() {
        assert_eq!(
            replays_taking_turns(deep_from_one_caller, deep_from_another_caller),
            4
        );
    }

    #[inline(never)]
    fn nested_remembered(depth: usize, memo: &mut Memo) -> Both {
        let r = if depth == 0 {
            remembered_and_walked(memo)
        } else {
            nested_remembered(depth - 1, memo)
        };
        std::hint::black_box(r)
    }

    /// The stack above this function's caller, by `walk` and by the general unwinder.
    #[inline(never)]
    fn both_captures() -> (Option<Vec<usize>>, Vec<usize>) {
        let mut regs = Registers::default();
        registers(&mut regs);
        let mut out = [0usize; 128];
        let walked = walk(&regs, stack_bounds(), &mut out, 2).map(|n| out[..n].to_vec());
        let me = both_captures as fn() -> (Option<Vec<usize>>, Vec<usize>) as usize;
        let (mut seen_me, mut to_skip, mut general) = (false, 1, Vec::new());
        backtrace::trace(|frame| {
            if !seen_me {
                seen_me = frame.symbol_address() as usize == me;
            } else if to_skip > 0 {
                to_skip -= 1;
            } else if !frame.ip().is_null() {
                // (It ends with a frame at address 0, where `walk` stops.)
                general.push(frame.ip() as usize);
            }
            general.len() < out.len()
        });
        (walked, general)
    }

    #[inline(never)]
    fn nested(depth: usize) -> (Option<Vec<usize>>, Vec<usize>) {
        let r = if depth == 0 {
            both_captures()
        } else {
            nested(depth - 1)
        };
        std::hint::black_box(r)
    }

    #[test]
    fn the_cached_walk_gives_the_general_unwinders_stack() {
        for _ in 0..2 {
            let (walked, general) = nested(5);
            assert!(general.len() > 6, "{general:x?}");
            assert_eq!(walked.as_ref(), Some(&general));
        }
    }

    /// `nested` below a frame of 8 KiB.
    #[inline(never)]
    fn below_a_big_frame() -> (Option<Vec<usize>>, Vec<usize>) {
        let mut buffer = [0u8; 8192];
        std::hint::black_box(&mut buffer);
        let r = nested(2);
        std::hint::black_box(&buffer);
        r
    }

    #[test]
    fn the_cached_walk_passes_a_frame_of_8_kib() {
        let (walked, general) = below_a_big_frame();
        assert_eq!(walked.as_ref(), Some(&general));
    }

    #[test]
    fn the_cached_walk_gives_the_general_unwinders_stack_on_a_new_thread() {
        let (walked, general) = std::thread::spawn(|| nested(3)).join().unwrap();
        assert_eq!(walked.as_ref(), Some(&general));
    }

    #[test]
    fn a_rule_survives_its_table_entry() {
        let ip = 0x5555_1234_5678;
        for rule in [
            Rule::Step {
                from_bp: false,
                cfa_words: 1,
                bp_words: 0,
            },
            Rule::Step {
                from_bp: true,
                cfa_words: 2,
                bp_words: 2,
            },
            Rule::Step {
                from_bp: false,
                cfa_words: MAX_CFA_WORDS,
                bp_words: MAX_BP_WORDS,
            },
            Rule::Outermost,
            Rule::Unknown,
        ] {
            let entry = encode(ip, rule);
            assert_eq!(decode(ip, entry), Some(rule));
            // Another address with the same index does not take it.
            assert_eq!(decode(ip + SETS, entry), None);
        }
    }

    #[test]
    fn a_stack_walked_again_finds_its_rules_in_the_table() {
        let mut lookups = Vec::new();
        // (A loop the compiler cannot unroll: both walks start from the same call.)
        for _ in 0..std::hint::black_box(2) {
            let (walked, _) = nested(4);
            assert!(walked.is_some());
            lookups.push(rule_lookups());
        }
        assert_eq!(lookups[0], lookups[1]);
    }

    #[test]
    fn addresses_sharing_a_set_take_turns_without_looking_their_rules_up_again() {
        // Addresses in no loaded object: their rule is `Unknown`, remembered like any other.
        let ips: Vec<usize> = (1..=WAYS).map(|k| 0x3000_0000_0000 + k * SETS).collect();
        for &ip in &ips {
            assert_eq!(rule_for(ip), Rule::Unknown);
        }
        let before = rule_lookups();
        for _ in 0..3 {
            for &ip in &ips {
                assert_eq!(rule_for(ip), Rule::Unknown);
            }
        }
        assert_eq!(rule_lookups(), before);
    }

    /// The rule of a row whose CFA is `rsp + 16`, with the return address below it and `bp`
    /// the rule of `rbp`.
    fn rule_with_bp(bp: RegisterRule<usize>) -> Rule {
        let cfa = CfaRule::RegisterAndOffset {
            register: X86_64::RSP,
            offset: 16,
        };
        rule_of(&cfa, Some(RegisterRule::Offset(-8)), Some(bp))
    }

    #[test]
    fn a_saved_rbp_offset_that_cannot_be_negated_is_left_to_the_general_unwinder() {
        assert_eq!(rule_with_bp(RegisterRule::Offset(i64::MIN)), Rule::Unknown);
    }

    #[test]
    fn an_empty_entry_holds_no_rule() {
        assert_eq!(decode(0x5555_0000_0000, 0), None);
    }

    #[test]
    fn a_frame_of_several_kibibytes_keeps_its_rule() {
        let ra = Some(RegisterRule::<usize>::Offset(-8));
        let cfa = CfaRule::RegisterAndOffset {
            register: X86_64::RSP,
            offset: 4176 + 8,
        };
        assert_eq!(
            rule_of(&cfa, ra, Some(RegisterRule::Offset(-16))),
            Rule::Step {
                from_bp: false,
                cfa_words: 523,
                bp_words: 2
            }
        );
    }

    #[test]
    fn a_cfa_offset_that_is_not_a_positive_number_of_words_is_left_to_the_general_unwinder() {
        let ra = Some(RegisterRule::<usize>::Offset(-8));
        let cfa = |offset| CfaRule::RegisterAndOffset {
            register: X86_64::RSP,
            offset,
        };
        assert_eq!(rule_of(&cfa(12), ra.clone(), None), Rule::Unknown);
        assert_eq!(rule_of(&cfa(-8), ra.clone(), None), Rule::Unknown);
        assert_eq!(
            rule_of(&cfa(48), ra, Some(RegisterRule::Offset(-16))),
            Rule::Step {
                from_bp: false,
                cfa_words: 6,
                bp_words: 2
            }
        );
    }

    #[test]
    fn an_undefined_return_address_ends_the_stack() {
        let cfa = CfaRule::<usize>::RegisterAndOffset {
            register: X86_64::RSP,
            offset: 8,
        };
        assert_eq!(
            rule_of(&cfa, Some(RegisterRule::Undefined), None),
            Rule::Outermost
        );
    }

    #[test]
    fn a_register_kept_in_another_register_is_left_to_the_general_unwinder() {
        assert_eq!(
            rule_with_bp(RegisterRule::Register(X86_64::RBX)),
            Rule::Unknown
        );
    }
}
