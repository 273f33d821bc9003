/**
 * Transparent huge pages for a runner's llama.cpp buffers (Linux, glibc). llama.cpp allocates its
 * KV cache and compute buffers with `posix_memalign`, and a decode walks all of them: with the 4 KiB
 * pages the kernel gives by default, every token pays tens of thousands of TLB misses, which a
 * virtual machine's nested page tables make dear. Where the kernel's THP mode is `madvise` (Debian's
 * and most distributions' default), memory gets 2 MiB pages only when the program asks for them,
 * and llama.cpp never does; glibc can ask on its behalf (`GLIBC_TUNABLES=glibc.malloc.hugetlb=1`,
 * glibc 2.35 and later: `madvise(MADV_HUGEPAGE)` on the large blocks malloc maps). With `hugePages:
 * "auto"` runners start with that tunable; `"off"` (the default) leaves the environment alone.
 *
 * Off by default because the gain did not hold up (docs/engine.md, *Transparent huge pages*): +2-4 %
 * decode for llama-server alone on one machine, but on the next, two llama-servers side by side
 * showed that the one started first ran 6-7 % faster whichever had the tunable (0.94 and 1.07 with
 * the starts swapped), which is as large as anything the tunable did. 270-280 MB of the benchmark
 * runner are then on huge pages; the weights, memory-mapped from the model file, stay on small
 * pages either way. The cost: a buffer rounds up by at most 2 MiB.
 * A GLIBC_TUNABLES the operator already set is kept, and its own `glibc.malloc.hugetlb` wins.
 *
 * @module
 */

/** `auto`: ask glibc for transparent huge pages in runners; `off`: leave the environment alone. */
export type HugePagesMode = 'auto' | 'off';

const TUNABLE = 'glibc.malloc.hugetlb';

/**
 * The `GLIBC_TUNABLES` value a runner starts with, given the parent's (`current`), or `undefined` to
 * leave it as it is.
 */
export function runnerTunables(mode: HugePagesMode, current: string | undefined): string | undefined {
  if (mode === 'off') return current;
  const items = (current ?? '').split(':').filter(Boolean);
  if (items.some((item) => item.startsWith(`${TUNABLE}=`))) return current;
  return [...items, `${TUNABLE}=1`].join(':');
}
