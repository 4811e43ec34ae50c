//! heapdelta's own blocks come from `System` under an inner allocator that holds state, and go back
//! there: `Tracker<Strict>` (a non-zero-sized inner allocator that aborts on any block it did not
//! hand out or on a wrong layout, and whose blocks `System` cannot free) through the scenarios of
//! `strict_inner/scenarios.rs`: blocks grown inside and outside heapdelta with alignments up to
//! 4096 and beyond, failures, other threads, thread exit, `pool_stats`.

#[path = "strict_inner/scenarios.rs"]
mod scenarios;
#[path = "strict_inner/strict.rs"]
mod strict;

use heapdelta::{CallSites, Tracker};
use strict::Strict;

#[global_allocator]
static GLOBAL: Tracker<Strict> = Tracker::wrap(Strict { id: 7 }).call_sites(CallSites::Exact);

const HAS_POOL: bool = false;

fn in_inner(p: *const u8, align: usize) -> Option<bool> {
    Some(strict::owns_user(p, align))
}

fn fail_inner(on: bool) -> bool {
    strict::FAIL.with(|f| f.set(on));
    true
}

#[test]
fn heapdeltas_own_blocks_go_to_system_and_back_in_every_scenario() {
    scenarios::a_tracked_block_goes_to_system_inside_and_back_outside_for_every_alignment();
    scenarios::own_blocks_of_every_alignment_are_freed_and_grown_by_the_program();
    scenarios::a_failed_move_leaves_the_old_block_and_the_counters_as_they_were();
    scenarios::own_blocks_cross_threads_and_are_freed_or_grown_there();
    scenarios::pool_stats_inside_and_outside_heapdelta();
    scenarios::many_threads_swap_own_and_tracked_blocks();
    scenarios::blocks_move_both_ways_in_a_destructor_that_runs_after_heapdeltas();
    scenarios::alignments_above_a_page_move_both_ways();
}
