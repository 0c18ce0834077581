#!/usr/bin/python3
"""Turn the raw results of bench/in-vm into results.md and results.png.

    bench/report.py RAW_DIR [OUT_DIR]

RAW_DIR holds what bench/in-vm wrote into $VM_OUT (info.txt and the CSV
files); OUT_DIR defaults to bench/results. Prints the targets, PASS or MISS,
and exits 0 whatever they are (1 only when RAW_DIR has no results at all).
"""
import csv
import math
import os
import statistics
import sys
from collections import defaultdict

TCG_NOTE = ("Measured in one run of a QEMU guest without KVM (TCG: every instruction "
            "emulated, 10-50x slower than native), all modes on the same guest. "
            "Absolute times mean little; the ratios are what count.")
OTHER_NOTE = ("Measured in one run, all modes on the same machine (not a TCG guest). "
              "Absolute times depend on the machine; the ratios are what count.")

MODE_LABEL = {
    "none": "no recorder",
    "mmap": "MMAP",
    "mmap2": "MMAP2",
    "mmap2bid": "MMAP2+build_id",
    "mmap3": "MMAP3",
    "code-region-rec": "code region, recorded",
    "code-region-rec-many": "code region, recorded, 64 per perfjit_load_many()",
    "code-region-idle": "code region, nobody records",
    "perf-map": "perf-PID.map",
    "jitdump": "jitdump",
    "none-perf-map": "no recorder (perf-map fallback)",
    "no-mmap3": "MMAP2 (--no-mmap3)",
}
MAP_MODES = ["none", "mmap", "mmap2", "mmap2bid", "mmap3"]
ANN_MODES = ["code-region-rec", "code-region-rec-many", "code-region-idle", "perf-map", "jitdump"]
SD_MODES = ["none", "none-perf-map", "mmap3", "perf-map", "jitdump"]
E2E_PIPES = ["mmap3", "jitdump", "perf-map"]
E2E_LABEL = {
    "mmap3": "MMAP3 (record, report)",
    "jitdump": "jitdump (record -k 1, inject --jit, report)",
    "perf-map": "perf-PID.map (record, report)",
}


def read_csv(raw, name):
    path = os.path.join(raw, name)
    if not os.path.exists(path):
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def read_info(raw):
    info = {}
    path = os.path.join(raw, "info.txt")
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                k, _, v = line.rstrip("\n").partition("=")
                if k:
                    info[k] = v
    return info


def num(v, default=None):
    try:
        x = float(v)
    except (TypeError, ValueError):
        return default
    return x if math.isfinite(x) else default


def med(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


# A distribution-free interval for the median of sorted @values: the k-th
# smallest and k-th largest, k the largest with a coverage of at least 95%
# (the chance that the true median lies between them, from the binomial
# distribution); with too few values, the smallest and the largest.
# Returns (low, high, coverage).
def median_interval(values):
    n = len(values)
    best = (values[0], values[-1], 1 - 2 / 2 ** n)
    for k in range(1, n // 2 + 1):
        cover = 1 - 2 * sum(math.comb(n, i) for i in range(k)) / 2 ** n
        if cover < 0.95:
            break
        best = (values[k - 1], values[n - k], cover)
    return best


def fmt(v, digits=1, unit=""):
    if v is None:
        return "–"
    if abs(v) >= 100 or digits == 0:
        s = f"{v:,.0f}"
    else:
        s = f"{v:,.{digits}f}"
    return s + unit


def ratio(a, b):
    if a is None or b is None or b == 0:
        return None
    return a / b


def fmt_ratio(r):
    return "–" if r is None else f"{r:.2f}x"


def table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for r in rows:
        out.append("| " + " | ".join(str(c) for c in r) + " |")
    return "\n".join(out)


class Runs:
    """A runtime section's runs (rows of its CSV whose status is ok), by
    pipeline, with @time the key of the runtime's wall time."""

    def __init__(self, rows, time):
        self.time = time
        self.by = defaultdict(list)
        for r in rows:
            self.by[r["pipeline"]].append(r)

    def m(self, pipe, key):
        return med([num(r[key]) for r in self.by.get(pipe, []) if num(r[key]) is not None])

    # A runtime's time varies by more than the targets from one run to the
    # next: @a's time against @b's is judged by each round's ratio (the two
    # runs of a round are close in time). Sorted.
    def ratios(self, a, b):
        ra = {r["round"]: num(r[self.time]) for r in self.by.get(a, [])}
        rb = {r["round"]: num(r[self.time]) for r in self.by.get(b, [])}
        return sorted(ra[k] / rb[k] for k in ra if ra[k] and rb.get(k))

    def spread(self, pipe):
        v = sorted(num(r[self.time]) for r in self.by.get(pipe, [])
                   if num(r[self.time]) is not None)
        return f" ({v[0]:.2f}-{v[-1]:.2f})" if len(v) > 1 else ""

    def share(self, pipe):
        js = self.m(pipe, "jit_samples")
        return self.m(pipe, "named") / js if js else 0


class Results:
    def __init__(self, raw):
        global TCG_NOTE
        self.raw = raw
        self.info = read_info(raw)
        if self.info.get("accel", "tcg") != "tcg":
            TCG_NOTE = OTHER_NOTE
        self.mapcost = read_csv(raw, "mapcost.csv")
        # The files on a block device (ext2 on a loop device; 9p where the
        # guest had none), then the same files on tmpfs.
        block = "ext2" if self.info.get("bid_dir", "").startswith("ext2") else "9p"
        self.buildid = ([dict(r, fs=block) for r in read_csv(raw, "buildid.csv")] +
                        [dict(r, fs="tmpfs") for r in read_csv(raw, "buildid-tmpfs.csv")])
        self.announce = read_csv(raw, "announce.csv")
        self.userevents = read_csv(raw, "userevents.csv")
        self.ctxsw = read_csv(raw, "ctxsw.csv")
        self.report = read_csv(raw, "report.csv")
        self.wx = read_csv(raw, "wx.csv")
        self.slowdown = read_csv(raw, "slowdown.csv")
        self.e2e = read_csv(raw, "e2e.csv")
        self.attach = read_csv(raw, "attach.csv")
        self.java = read_csv(raw, "java.csv")
        self.node = read_csv(raw, "node.csv")
        # The overhead runs again, in a guest whose clock counts instructions
        # (bench/run's second boot): there a run's time varies by about 1%,
        # under plain TCG by up to 20%, more than the bounds being judged.
        icount = os.path.join(raw, "icount")
        self.icount_info = read_info(icount)
        self.java_icount = read_csv(icount, "java.csv")
        self.node_icount = read_csv(icount, "node.csv")
        self.report_icount = read_csv(icount, "report.csv")
        self.targets = []  # (name, measured, verdict)

    def empty(self):
        return not any([self.mapcost, self.buildid, self.announce, self.report,
                        self.slowdown, self.e2e, self.attach, self.java, self.node])

    # ---- 1. mapping cost ----
    def mapcost_medians(self):
        by = defaultdict(list)
        recs = defaultdict(lambda: [0, 0, 0, 0])  # iters, records, with_bid, lost
        for r in self.mapcost:
            key = (r["op"], r["mode"])
            by[key].append(num(r["ns_per_call"]))
            acc = recs[key]
            acc[0] += int(r["iters"])
            acc[1] += int(r["records"])
            acc[2] += int(r["with_build_id"])
            acc[3] += int(r["lost"])
        return {k: med(v) for k, v in by.items()}, recs

    def mapcost_paired(self, op, mode):
        """Geometric mean of the per-round ratios of @mode to MMAP2+build_id,
        with a 95% interval: both ran in the same round, minutes apart at
        most, so a drift of the guest's speed cancels out."""
        ns = {(r["round"], r["mode"]): num(r["ns_per_call"]) for r in self.mapcost if r["op"] == op}
        logs = [math.log(ns[(rnd, mode)] / ns[(rnd, "mmap2bid")])
                for rnd, m in ns if m == mode and ns.get((rnd, "mmap2bid")) and ns[(rnd, mode)]]
        if not logs:
            return None, None, None
        mean = statistics.fmean(logs)
        half = 1.96 * statistics.stdev(logs) / math.sqrt(len(logs)) if len(logs) > 1 else 0.0
        return math.exp(mean), math.exp(mean - half), math.exp(mean + half)

    def section_mapcost(self):
        md = ["## 1. Mapping cost", "", TCG_NOTE, ""]
        if not self.mapcost:
            md.append("No results (mapcost did not run or failed).")
            self.targets.append(("Mapping cost with MMAP3 within 1.10x of MMAP2+build_id",
                                 "not measured", "MISS"))
            return "\n".join(md)
        meds, recs = self.mapcost_medians()
        rounds = len({r["round"] for r in self.mapcost})
        i = self.info
        md.append(
            f"A C program (`bench/src/mapcost.c`) records itself with a `PERF_COUNT_SW_DUMMY` event "
            f"(pid 0, cpu -1, `sample_id_all`, TID|TIME, a 256-page ring buffer drained between "
            f"timed batches of 250 calls) and times `mmap()`+`munmap()` of `{i.get('map_file', '?')}` "
            f"(PROT_READ|PROT_EXEC, MAP_PRIVATE; {i.get('map_iters', '?')} calls) and "
            f"`dlopen()`+`dlclose()` of a small library ({i.get('dl_iters', '?')} calls). "
            f"The modes ran interleaved, {rounds} rounds, each round starting with the next mode; "
            "the library is in the guest's tmpfs, so that dlopen() does not time round trips to the "
            "host. The ratio to MMAP2+build_id is the geometric mean of the ratios within each "
            "round, with its 95% interval: the guest's speed drifts between rounds (a shared "
            "host), and pairing cancels that out.")
        md.append("")
        rows = []
        for op, label in [("mmap", "mmap+munmap"), ("dlopen", "dlopen+dlclose")]:
            for m in MAP_MODES:
                if (op, m) not in meds:
                    continue
                it, nrec, nbid, lost = recs[(op, m)]
                g, lo, hi = self.mapcost_paired(op, m)
                rows.append([label, MODE_LABEL[m], fmt(meds[(op, m)], 0),
                             f"{fmt_ratio(g)} ({lo:.2f}–{hi:.2f})" if g else "–",
                             f"{nrec / it:.2f}" if it else "–",
                             f"{100 * nbid / nrec:.0f}%" if nrec and m in ("mmap2bid", "mmap3") else "–",
                             lost])
        md.append(table(["operation", "recording", "ns per call (median)",
                         "ratio to MMAP2+build_id (95% interval)",
                         "records per call", "with build-id", "lost"], rows))
        # target
        parts, ok = [], True
        for op in ("mmap", "dlopen"):
            r, _, hi = self.mapcost_paired(op, "mmap3")
            if r is None:
                continue
            parts.append(f"{op} {r:.2f}x (95%: up to {hi:.2f}x)")
            ok &= r <= 1.10
        if not parts:
            self.targets.append(("Mapping cost with MMAP3 within 1.10x of MMAP2+build_id",
                                 "MMAP3 not measured", "MISS"))
        else:
            self.targets.append(("Mapping cost with MMAP3 within 1.10x of MMAP2+build_id",
                                 ", ".join(parts), "PASS" if ok else "MISS"))
        md.append("")
        md.append(self.section_buildid())
        return "\n".join(md)

    def section_buildid(self):
        md = ["### Build-ids after a page-cache drop", ""]
        name = "Build-ids in 100% of ELF mappings after a cache drop (MMAP3), block device and tmpfs"
        if not self.buildid:
            md.append("No results.")
            self.targets.append((name, "not measured", "MISS"))
            return "\n".join(md)
        md.append(
            f"`echo 3 > /proc/sys/vm/drop_caches`, then one `mmap()` (PROT_READ|PROT_EXEC) of each of "
            f"{self.buildid[0]['files']} distinct ELF files with a GNU build-id from "
            "/usr/lib/x86_64-linux-gnu that the program had not mapped; the cache is dropped again "
            "before each mode. \"correct\": the record's build-id equals the file's. The warm row "
            "maps the same files again without a drop, after the MMAP3 pass read their notes. "
            "The files are on ext2 on a loop device (the kernel reads a note that is not cached), "
            "then copied to tmpfs (whose pages are the files: a drop keeps them).")
        md.append("")
        rows = []
        mmap3 = {}
        for r in self.buildid:
            files = int(r["files"])
            has = int(r["with_build_id"])
            rows.append([r["fs"], MODE_LABEL.get(r["mode"], r["mode"]),
                         "dropped" if r["cache"] == "dropped" else "warm (no drop)",
                         files, r["records"], f"{has} ({100 * has / files:.0f}%)" if files else "–",
                         r["correct"], r["build_id_err"], r["lost"]])
            if r["mode"] == "mmap3" and r["cache"] == "dropped":
                mmap3[r["fs"]] = r
        md.append(table(["file system", "recording", "page cache", "files", "records",
                         "with build-id", "correct", "BUILD_ID_ERR", "lost"], rows))
        if "tmpfs" not in mmap3 or len(mmap3) < 2:
            self.targets.append((name, "MMAP3 not measured after a drop on "
                                 + ("a block device" if "tmpfs" in mmap3 else "tmpfs"), "MISS"))
        else:
            parts, ok = [], True
            for fs, r in mmap3.items():
                files, corr = int(r["files"]), int(r["correct"])
                ok = ok and files > 0 and corr == files
                parts.append(f"{fs}: {corr}/{files} correct build-ids"
                             + (f" ({100 * corr / files:.0f}%)" if files else ""))
            self.targets.append((name, ", ".join(parts), "PASS" if ok else "MISS"))
        return "\n".join(md)

    # ---- 2. announce ----
    def announce_medians(self):
        by = defaultdict(lambda: defaultdict(list))
        for r in self.announce:
            for k in ("load_ns", "unload_ns", "records", "side_files"):
                by[r["mode"]][k].append(num(r[k]))
        return {m: {k: med(v) for k, v in d.items()} for m, d in by.items()}

    def section_announce(self):
        md = ["## 2. Announce cost per JIT code region", "", TCG_NOTE, ""]
        name = "Announce cost with nobody recording at most 0.2x of a perf-map line"
        if not self.announce:
            md.append("No results.")
            self.targets.append((name, "not measured", "MISS"))
            return "\n".join(md)
        meds = self.announce_medians()
        rounds = len({r["round"] for r in self.announce})
        md.append(
            f"`bench/src/announce.cpp`: {self.info.get('ann_funcs', '?')} functions of 16 bytes, each "
            "with its own code bytes, in one RWX mapping, announced with `perfjit_load()` (then "
            "`perfjit_unload()`), timed in batches of 500. \"recorded\": the program holds a dummy "
            "event with `mmap3` and `code_regions` on itself that asked for its code (a rundown request), so "
            "libperfjit announces each load and writes each side file into a temporary PERF_BUILDID_DIR (the "
            "ring buffer is drained between batches); \"nobody records\": no recorder ever asked, so "
            "libperfjit keeps the code and makes no system call; "
            "\"64 per perfjit_load_many()\": the same, announced in groups of 64 that share a side "
            "file, as a runtime that compiles a module at once would. "
            f"Modes interleaved, {rounds} rounds; medians. Ratios are to perf-PID.map.")
        md.append("")
        base = meds.get("perf-map", {}).get("load_ns")
        rows = []
        for m in ANN_MODES:
            if m not in meds:
                continue
            d = meds[m]
            rows.append([MODE_LABEL[m], fmt(d["load_ns"], 0), fmt_ratio(ratio(d["load_ns"], base)),
                         fmt(d["unload_ns"], 0),
                         fmt(d["records"], 0) if m.startswith("code-region-rec") else "–",
                         fmt(d["side_files"], 0) if m.startswith("code-region") else "–"])
        md.append(table(["mode", "ns per announce (load)", "ratio to perf-map", "ns per unload",
                         "MMAP3 code-region records (loads+unloads)", "side files written"], rows))
        # Cross-check with perfjit-calc, whose functions carry line tables
        # and unwind info (section 4): nobody recording, code regions
        # against the perf-map fallback.
        sd = defaultdict(list)
        for row in self.slowdown:
            sd[row["mode"]].append(num(row["announce_us"]))
        a, b = med(sd.get("none", [])), med(sd.get("none-perf-map", []))
        if a is not None and b:
            md.append("")
            md.append(f"Cross-check with perfjit-calc (section 4; its functions carry line tables, "
                      f"which libperfjit keeps at each load and hashes into the build-id only once a "
                      f"recorder asked): nobody recording, code regions cost {a:,.1f} us per function against "
                      f"{b:,.1f} us for the perf-map fallback ({a / b:.2f}x).")
        md.extend(self.userevents_table())
        md.extend(self.ctxsw_table())
        r = ratio(meds.get("code-region-idle", {}).get("load_ns"), base)
        if r is None:
            self.targets.append((name, "not measured", "MISS"))
        else:
            self.targets.append((name, f"{r:.2f}x", "PASS" if r <= 0.2 else "MISS"))
        # A JVM compiles one method at a time: a load alone, while somebody
        # records, against jitdump's write of the same method. (The side
        # files are stored by libperfjit's thread, not in the load.)
        name = "One-at-a-time load while somebody records within 2x of jitdump's per-method write"
        r = ratio(meds.get("code-region-rec", {}).get("load_ns"),
                  meds.get("jitdump", {}).get("load_ns"))
        if r is None:
            self.targets.append((name, "not measured", "MISS"))
        else:
            self.targets.append((name, f"{r:.2f}x", "PASS" if r <= 2.0 else "MISS"))
        return "\n".join(md)

    def userevents_table(self):
        if not self.userevents:
            return []
        labels = [("prctl-idle", "prctl, no event takes code regions"),
                  ("prctl-rec", "prctl, a code_regions event takes them"),
                  ("ue-idle", "user_events write(), not enabled (EBADF)"),
                  ("ue-rec", "user_events write(), a perf event on its tracepoint"),
                  ("uprobe-rec", "__jit_debug_register_code() with a perf event on a uprobe on it")]
        by = defaultdict(lambda: defaultdict(list))
        for r in self.userevents:
            by[r["mode"]]["ns"].append(num(r["ns_per_region"]))
            by[r["mode"]]["bytes"].append(num(r["bytes_per_record"]))
        base = med(by.get("prctl-rec", {}).get("ns", []))
        rows = []
        for m, label in labels:
            if m not in by:
                continue
            ns, b = med(by[m]["ns"]), med(by[m]["bytes"])
            rows.append([label, fmt(ns, 0), fmt_ratio(ratio(ns, base)), fmt(b, 0) if b else "–"])
        rounds = len({r["round"] for r in self.userevents})
        return ["",
                "The same regions without libperfjit, by the other ways a runtime could tell the kernel "
                "(`bench/src/userevents.c`: one region at a time, each with a 20-byte build-id and a name; "
                f"{rounds} rounds, medians; ratios to the prctl while recorded). A user_event carries "
                "\"u64 addr; u64 len; u64 pgoff; u32 flags; __rel_loc char[] name; char[20] build_id; "
                "u8 build_id_size\" as a PERF_SAMPLE_RAW sample; the uprobe is the trap alone, before any "
                "copy of the in-memory ELF object that the GDB JIT interface hands over.",
                "",
                table(["way", "ns per region", "ratio to the prctl, recorded", "bytes per record"], rows)]

    def ctxsw_table(self):
        if not self.ctxsw:
            return []
        labels = [("none", "no recorder"),
                  ("rec", "perf record -a --no-code-regions"),
                  ("rec-code-regions", "perf record -a (code regions: the sched-in check is on)"),
                  ("rec-code-regions-registered",
                   "perf record -a, both processes registered for rundowns")]
        by = defaultdict(list)
        signalled = defaultdict(list)
        for r in self.ctxsw:
            if r.get("status") == "ok" and num(r["ns_per_switch"]) is not None:
                by[r["mode"]].append(num(r["ns_per_switch"]))
                signalled[r["mode"]].append(num(r["signalled"], 0))
        base = med(by.get("rec", []))
        rows = []
        for m, label in labels:
            if m not in by:
                continue
            v = by[m]
            rows.append([label, fmt(med(v), 0), f"{fmt(min(v), 0)}-{fmt(max(v), 0)}",
                         fmt_ratio(ratio(med(v), base)), fmt(med(signalled[m]), 0)])
        rounds = len({r["round"] for r in self.ctxsw})
        trips = self.ctxsw[0].get("round_trips", "?")
        return ["",
                "Context switches under `perf record -a -e cpu-clock` (`bench/src/ctxsw.c`: two "
                f"processes on CPU 0 pass a byte back and forth {trips} times, two switches per round "
                f"trip; {rounds} rounds, modes interleaved, medians, ratios to the recording without "
                "code regions). With code regions perf asks each CPU event for a rundown, which turns "
                "on the check in `__perf_event_task_sched_in()`: a count of CPU-wide code-region events, "
                "the CPU's own count, its request sequence against its floor and, for a registered "
                "process, its registration's last seen request. \"Signalled\": rundown requests that reached the two registrations. "
                "Under TCG a switch costs tens of microseconds and the spread between rounds is wide: "
                "a difference smaller than the spread is not a measured cost.",
                "",
                table(["recording", "ns per switch", "range", "ratio", "signalled"], rows)]

    # ---- 3. end to end ----
    def section_e2e(self):
        md = ["## 3. End to end: record to a finished `perf report --stdio`", "", TCG_NOTE, ""]
        name = "End to end at the largest size jitdump's leg runs: >= 10x faster than jitdump, <= 1/2 its disk, 100% of sampled functions named"
        if not self.e2e:
            md.append("No results.")
            self.targets.append((name, "not measured", "MISS"))
            return "\n".join(md)
        md.append(
            f"perfjit-calc --functions N --seconds {self.info.get('e2e_seconds', '?')} under "
            "`perf record -k 1 -e cpu-clock`, one run per cell. The demo announces its first "
            "compiles 64 at a time (`perfjit_load_many()`: one side file per batch), recompiles its "
            "8 hot functions and frees every third other function; the JIT's allocator puts new hot "
            "code where old hot code was. Wall time from the start of `perf record` "
            "to the end of `perf report --stdio --sort sym` (with `perf inject --jit` between for "
            "jitdump). Disk: perf.data (and the injected one), perf-PID.map, and the JIT's files: "
            "side files in the build-id cache (MMAP3), the jitdump file, the jitted .so files and "
            "their copies in the build-id cache (jitdump). perf's copies of ordinary ELF files "
            "(libc, kallsyms...) in the build-id cache are the same for every pipeline and are shown "
            "apart (\"other cache\"), not in \"disk\". Hot functions named: the distinct names of "
            "the truth lines of functions that ran 1 ms or more (so that each has samples) found "
            "as a symbol in the report (`scripts/profile-jit`, which runs each pipeline). Samples "
            "named right: the samples whose address and time "
            "fall in a hot function's code while it was live (the demo prints both, on "
            "CLOCK_MONOTONIC like `-k 1`) and that `perf script` names after that function "
            "(`scripts/check-demo-names-by-time`); perf-PID.map has one name per address for the whole run, "
            "so where two hot functions used one address in turn, one of them gets the other's name. "
            "A step cut short by the time budget shows \"timeout\"; its "
            "time and disk are then lower bounds (\">\"). jitdump's leg runs up to "
            f"{int(self.info.get('e2e_jitdump_max', 0) or 0):,} functions, where it finishes in the "
            "budget (at 100,000, its `perf inject --jit` alone ran past a 363 s step), so that the "
            "speed-up is a ratio; MMAP3 and perf-PID.map run at every size.")
        md.append("")
        rows = []
        by = {(int(r["functions"]), r["pipeline"]): r for r in self.e2e}
        sizes = sorted({k[0] for k in by})
        for n in sizes:
            jd = by.get((n, "jitdump"))
            for p in E2E_PIPES:
                r = by.get((n, p))
                if not r:
                    continue
                cut = r["status"] != "ok"
                lb = ">" if cut else ""
                tot, disk = num(r["total_s"]), num(r["disk_kb"])
                sp = dr = "–"
                if p != "jitdump" and jd:
                    jt, jdk = num(jd["total_s"]), num(jd["disk_kb"])
                    jcut = jd["status"] != "ok"
                    if not cut and tot:
                        sp = (">" if jcut else "") + fmt_ratio(ratio(jt, tot))
                    if disk is not None and jdk:
                        dr = ("<" if jcut and not cut else "") + fmt_ratio(ratio(disk, jdk))
                hot = f"{r['hot_named']}/{r['hot']}" if not cut else "–"
                samples = "–"
                if not cut and num(r.get("samples")):
                    ns, nn = int(r["samples"]), int(r["samples_named"])
                    samples = f"{nn:,}/{ns:,} ({100 * nn / ns:.1f}%)"
                want = "code-region" if p == "mmap3" else p
                note = "" if r["announce_mode"] == want else f" [libperfjit mode: {r['announce_mode']}]"
                rows.append([f"{n:,}", E2E_LABEL[p] + note,
                             r["status"], fmt(num(r["record_s"]), 1), fmt(num(r["inject_s"]), 1) if p == "jitdump" else "–",
                             fmt(num(r["report_s"]), 1), lb + fmt(tot, 1), sp,
                             lb + fmt(disk / 1024 if disk is not None else None, 1),
                             dr, r["jit_files"], fmt(num(r["other_kb"], 0) / 1024, 1), hot, samples])
        md.append(table(["functions", "pipeline", "status", "record s", "inject s", "report s",
                         "total s", "speed-up vs jitdump", "disk MiB", "disk vs jitdump",
                         "JIT files", "other cache MiB", "hot named", "samples named right"], rows))
        # target, at the largest size with a jitdump leg
        jsizes = [k[0] for k in by if k[1] == "jitdump"]
        n = max(jsizes) if jsizes else sizes[-1]
        m, j = by.get((n, "mmap3")), by.get((n, "jitdump"))
        label = f"{name.split(':')[0]} ({n:,} functions)"
        if not m or not j:
            self.targets.append((label, "not measured", "MISS"))
        elif m["status"] != "ok":
            self.targets.append((label, f"MMAP3 pipeline {m['status']}", "MISS"))
        elif m["announce_mode"] != "code-region":
            self.targets.append((label, f"libperfjit used {m['announce_mode']}, not code regions", "MISS"))
        else:
            jcut = j["status"] != "ok"
            sp = ratio(num(j["total_s"]), num(m["total_s"]))
            dr = ratio(num(m["disk_kb"]), num(j["disk_kb"]))
            ns, nn = int(num(m.get("samples"), 0)), int(num(m.get("samples_named"), 0))
            hot_ok = int(m["hot"]) > 0 and m["hot"] == m["hot_named"] and ns > 0 and nn == ns
            ok = sp is not None and sp >= 10 and dr is not None and dr <= 0.5 and hot_ok
            gt = ">=" if jcut else ""
            meas = (f"{gt}{sp:.1f}x faster, disk {'<=' if jcut else ''}{dr:.2f}x of jitdump, "
                    f"{m['hot_named']}/{m['hot']} hot named, {nn:,}/{ns:,} samples named right")
            if jcut:
                meas += f" (jitdump {j['status']} after {fmt(num(j['total_s']), 0)} s: lower bounds)"
            self.targets.append((label, meas, "PASS" if ok else "MISS"))
        return "\n".join(md)

    # ---- 4. slowdown ----
    def section_slowdown(self):
        md = ["## 4. Workload slowdown", "", TCG_NOTE, ""]
        if not self.slowdown:
            md.append("No results.")
            return "\n".join(md)
        i = self.info
        rounds = len({r["round"] for r in self.slowdown})
        md.append(
            f"perfjit-calc --functions {i.get('sd_funcs', '?')} --seconds {i.get('sd_seconds', '?')}: "
            "the compile and announce cost per function it reports on stderr, its own wall time "
            "(measured around it by `bench/src/timeit`, inside the recording) and the total "
            "including perf record's start-up and finish. \"no recorder\": libperfjit in auto mode "
            "(code regions; the prctl returns 0). Ratios are to no recorder. "
            f"{rounds} rounds, interleaved; medians.")
        md.append("")
        by = defaultdict(lambda: defaultdict(list))
        modes_seen = {}
        for r in self.slowdown:
            for k in ("compile_us", "announce_us", "calc_s", "total_s"):
                by[r["mode"]][k].append(num(r[k]))
            modes_seen[r["mode"]] = r["announce_mode"]
        meds = {m: {k: med(v) for k, v in d.items()} for m, d in by.items()}
        base = meds.get("none", {})
        rows = []
        for m in SD_MODES:
            if m not in meds:
                continue
            d = meds[m]
            label = {"none": "no recorder", "none-perf-map": "no recorder, perf-map fallback",
                     "mmap3": "perf record (MMAP3, code regions)", "perf-map": "perf record, perf-PID.map",
                     "jitdump": "perf record -k 1, jitdump"}[m]
            ca = (d["compile_us"] or 0) + (d["announce_us"] or 0) if d["compile_us"] is not None else None
            cab = (base.get("compile_us") or 0) + (base.get("announce_us") or 0) if base.get("compile_us") is not None else None
            rows.append([label, modes_seen[m], fmt(d["compile_us"], 2), fmt(d["announce_us"], 2),
                         fmt_ratio(ratio(ca, cab)), fmt(d["calc_s"], 2),
                         fmt_ratio(ratio(d["calc_s"], base.get("calc_s"))), fmt(d["total_s"], 2),
                         fmt_ratio(ratio(d["total_s"], base.get("total_s")))])
        md.append(table(["recording", "libperfjit mode", "compile us/function", "announce us/function",
                         "compile+announce vs none", "perfjit-calc s", "vs none", "total s", "vs none"],
                        rows))
        return "\n".join(md)

    # ---- 5. report throughput ----
    # perf report's time per mode in @rows (report.csv, wx.csv): the
    # medians, the times of the runs that ended ok, and each mode's first row.
    @staticmethod
    def report_medians(rows):
        by = defaultdict(list)
        first = {}
        for r in rows:
            if r["status"] == "ok":
                by[r["mode"]].append(num(r["report_s"]))
            first.setdefault(r["mode"], r)
        return {m: med(v) for m, v in by.items()}, by, first

    def section_report(self):
        md = ["## 5. Report throughput", "", TCG_NOTE, ""]
        name = "perf report with MMAP3 within 1.10x of MMAP2"
        if not self.report:
            md.append("No results.")
            self.targets.append((name, "not measured", "MISS"))
            return "\n".join(md)
        runs = len({r["run"] for r in self.report})
        md.append(
            f"`perf record -F 100 -e cpu-clock --mmap3` and `--no-mmap3` of `mapcost loop`: "
            f"{int(self.info.get('rt_iters', 0)):,} mmap()+munmap() of an ELF file, then "
            f"`perf report --stdio > /dev/null` of each, {runs} runs interleaved; medians. "
            f"Sampled at 100 Hz, so that the report's time is that of the mapping records "
            f"(at 4000 Hz the MMAP3 recording had 78% more samples, the kernel reading the "
            f"build-id at each mmap, and resolving those was most of the difference). The "
            f"pair runs again in the boot whose clock counts instructions, where it is "
            f"judged.")
        md.append("")
        icount = self.icount_rows(self.report_icount)
        rows = []
        for guest, data in (("instruction-counting", icount), ("plain TCG", self.report)):
            meds, by, first = self.report_medians(data)
            base = meds.get("no-mmap3")
            for m in ("mmap3", "no-mmap3"):
                if m not in first:
                    continue
                r = first[m]
                rows.append([guest, MODE_LABEL[m], f"{int(r['records'] or 0):,}",
                             f"{int(num(r.get('samples'), 0)):,}", fmt(num(r["data_kb"], 0) / 1024, 1), fmt(num(r["record_s"]), 1),
                             fmt(meds.get(m), 2), fmt_ratio(ratio(meds.get(m), base)),
                             f"{len(by[m])}/{sum(1 for x in data if x['mode'] == m)}"])
        md.append(table(["guest", "recording", "mapping records", "samples", "perf.data MiB", "perf record s",
                         "perf report s (median)", "ratio to MMAP2", "runs ok"], rows))
        judged = icount or self.report
        meds, _, first = self.report_medians(judged)
        r = ratio(meds.get("mmap3"), meds.get("no-mmap3"))
        where = "in the instruction-counting guest" if icount else \
            "under plain TCG (no instruction-counting run)"
        nrec = int(first.get("mmap3", {}).get("records") or 0)
        if r is None or nrec == 0:
            self.targets.append((name, "not measured" if r is None else "no MMAP3 records in perf.data",
                                 "MISS"))
        else:
            wall = ""
            if icount:
                wm = self.report_medians(self.report)[0]
                wr = ratio(wm.get("mmap3"), wm.get("no-mmap3"))
                wall = f"; plain TCG {wr:.2f}x" if wr is not None else ""
            self.targets.append((name, f"{r:.2f}x {where}{wall}", "PASS" if r <= 1.10 else "MISS"))
        return "\n".join(md)

    def section_wx(self):
        md = ["## 5b. A W^X JIT", "", TCG_NOTE, ""]
        name = "perf report of 100,000 W^X functions with code regions within 1.5x of perf-PID.map"
        if not self.wx:
            md.append("No results.")
            self.targets.append((name, "not measured", "MISS"))
            return "\n".join(md)
        meds, by, first = self.report_medians(self.wx)
        funcs = int(self.info.get("wx_funcs", 0) or 0)
        runs = len({r["run"] for r in self.wx})
        md.append(
            f"`perf record -F 100 -e cpu-clock` of `perfjit-calc --wx --functions {funcs:,}`: each "
            f"compile makes its pages writable, writes, and makes them executable again, so the "
            f"kernel records the JIT's code mapping at every compile, over all the code regions "
            f"announced before (a code region per 64 functions, the demo's default). Then "
            f"`perf report --stdio --sort sym` of each, {runs} runs interleaved; medians. 100 Hz: "
            f"the report's time is that of the mapping records, not of the samples.")
        md.append("")
        rows = []
        base = meds.get("perf-map")
        for m, label in (("code-region", "code regions"), ("perf-map", "perf-PID.map")):
            if m not in first:
                continue
            r = first[m]
            rows.append([label, f"{int(r['records'] or 0):,}", f"{int(r['samples'] or 0):,}",
                         fmt(num(r["record_s"]), 1), fmt(meds.get(m), 2),
                         fmt_ratio(ratio(meds.get(m), base)),
                         f"{len(by[m])}/{sum(1 for x in self.wx if x['mode'] == m)}"])
        md.append(table(["JIT names", "MMAP3 records", "samples", "perf record s",
                         "perf report s (median)", "ratio to perf-PID.map", "runs ok"], rows))
        r = ratio(meds.get("code-region"), base)
        if r is None:
            self.targets.append((name, "not measured", "MISS"))
        elif funcs < 100000:
            self.targets.append((name, f"{r:.2f}x at {funcs:,} functions", "MISS"))
        else:
            self.targets.append((name, f"{r:.2f}x", "PASS" if r <= 1.5 else "MISS"))
        return "\n".join(md)

    def section_attach(self):
        md = ["## 6. Attaching to a running JIT", "", TCG_NOTE, ""]
        name = "perf record -p after the JIT loaded its code names at least 99% of its samples"
        if not self.attach:
            md.append("No results.")
            self.targets.append((name, "not measured", "MISS"))
            return "\n".join(md)
        md.append(
            f"`bench/src/attach` loads N functions through libperfjit in batches of 1,000 while "
            f"nobody records, then runs them all in turn; `perf record -e cpu-clock -p` attaches "
            f"for {self.info.get('att_seconds', '?')} s. The kernel signals the library, whose "
            f"thread stores the side files and announces the live code again (a rundown); perf "
            f"places it from the start of the recording. Named: samples in the JIT's code that "
            f"resolve to one of its functions. Rundown: from the first sample to the last rundown "
            f"record.")
        md.append("")
        rows, worst = [], None
        for r in self.attach:
            total, named = int(num(r["samples"], 0)), int(num(r["named"], 0))
            frac = named / total if total else None
            if r["status"] == "ok" and frac is not None:
                worst = frac if worst is None else min(worst, frac)
            else:
                worst = 0.0
            rows.append([f"{int(r['functions']):,}", f"{total:,}", f"{named:,}",
                         "–" if frac is None else f"{100 * frac:.1f}%",
                         r["rundown_records"], fmt(num(r["rundown_ms"]), 0, " ms"), r["status"]])
        md.append(table(["live functions", "JIT samples", "named", "named %", "rundown records",
                         "rundown complete after", "status"], rows))
        if worst is None:
            self.targets.append((name, "no samples", "MISS"))
        else:
            self.targets.append((name, f"at least {100 * worst:.1f}% at every size",
                                 "PASS" if worst >= 0.99 else "MISS"))
        return "\n".join(md)

    # The overhead runs of the instruction-counting guest (bench/run's
    # second boot), when that is what they are.
    def icount_rows(self, rows):
        i = self.icount_info
        return rows if i.get("clock") == "icount" and i.get("part") == "overhead" else []

    # A runtime's time with @pipe against @base (an agent loaded and nobody
    # recording against nothing loaded, or one recording against another),
    # judged on the instruction-counting guest's runs (@icount): the median
    # of the rounds' ratios with its distribution-free interval
    # (median_interval()), PASS when the whole interval is at most @bound.
    # The plain TCG guest's runs (@wall) are shown beside them; @other is a
    # further pipeline of @pipe's kind, shown as @other_name; @of names
    # @base in the text.
    def overhead_target(self, name, wall, icount, time, pipe, base, bound, of="",
                        other=None, other_name=""):
        def ratios(rows, a):
            return Runs([r for r in rows if r["status"] == "ok"], time).ratios(a, base)

        def text(rs):
            lo, hi, cover = median_interval(rs)
            return (f"{med(rs):.3f}x{of} (median of {len(rs)} rounds' ratios; "
                    f"{100 * cover:.0f}% interval {lo:.3f}x to {hi:.3f}x; rounds {rs[0]:.3f}x "
                    f"to {rs[-1]:.3f}x)")
        ic = ratios(self.icount_rows(icount), pipe)
        wl = ratios(wall, pipe)
        parts = []
        if ic:
            parts.append(f"{text(ic)} in the instruction-counting guest")
            oc = ratios(self.icount_rows(icount), other) if other else []
            if oc:
                parts.append(f"{other_name}: {med(oc):.3f}x there")
        else:
            parts.append("not measured in the instruction-counting guest")
        if wl:
            parts.append(f"wall time under plain TCG: {med(wl):.3f}x ({len(wl)} rounds, "
                         f"{wl[0]:.3f}x to {wl[-1]:.3f}x)")
        # Too few rounds for a 95% interval (fewer than 6) judge nothing.
        ok = bool(ic) and median_interval(ic)[2] >= 0.95 and \
            round(median_interval(ic)[1], 3) <= bound
        self.targets.append((name, "; ".join(parts), "PASS" if ok else "MISS"))

    # The overhead runs of the instruction-counting guest, for a section's
    # text: @pipes' times, the last of them the one whose spread is given.
    def overhead_note(self, rows, time, pipes, unit):
        rt = Runs([r for r in self.icount_rows(rows) if r["status"] == "ok"], time)
        pipes = [p for p in pipes if p in rt.by]
        if not pipes:
            return []
        i = self.icount_info
        none = sorted(num(r[time]) for r in rt.by.get(pipes[-1], []) if num(r[time]))
        cv = statistics.pstdev(none) / statistics.mean(none) if len(none) > 1 else None
        return ["", f"The overhead pipelines again, in a second boot whose clock counts "
                    f"instructions (QEMU `-icount shift=0,sleep=on`, `scripts/vm-run --icount`; "
                    f"{fmt(num(i.get('elapsed_s')), 0)} s of its clock): idle-* "
                    f"{i.get('idle_rounds', '?')} rounds, the recorded ones "
                    f"{i.get('recorded_rounds', '?')}, their time alone. There a run's time is "
                    f"the instructions that both vCPUs ran meanwhile, 1 ns each, one vCPU after "
                    f"the other, and the host's real time while the guest had nothing to run "
                    f"(waiting on the 9p root, or a timer); under plain TCG a run's wall time "
                    f"varies by up to 20% with the host's load, more than the bounds being "
                    f"judged. Instructions stand in for time: each costs the same, and cache and "
                    f"TLB misses cost nothing. The overhead targets are judged on these runs"
                    + (f" ({pipes[-1]}'s runs varied by {100 * cv:.1f}%, standard deviation over "
                       f"mean)" if cv is not None else "") + f". {unit}: " +
                    ", ".join(f"{p} {rt.m(p, time):.3f} s{rt.spread(p)}" for p in pipes) + "."]

    # ---- 7. Java ----
    # A runtime section with no run that finished: its targets not measured.
    def not_measured(self, md, names, why):
        md.append(f"No results ({why}).")
        self.targets += [(n, "not measured", "MISS") for n in names]
        return "\n".join(md)

    def section_java(self):
        md = ["## 7. Java: libperfjit's agent against perf's agent", "", TCG_NOTE, ""]
        names = ["JVM run time under an MMAP3 recording within 1.10x of perf's agent",
                 "Java record-to-report (inject + report) at least 5x faster than jitdump + inject",
                 "Java disk at most half of jitdump + inject",
                 "Java: at least as many JIT samples named as perf's agent",
                 "Java: inlined frames where perf's agent has none",
                 "Java: agent loaded and nobody recording within 1.02x of no agent"]
        ok = [r for r in self.java if r["status"] == "ok"]
        if not ok:
            return self.not_measured(md, names, "no JDK in the guest, or every run failed")
        md.append(
            f"The Java workload (`demo/java`: hot loops, inlined helpers, a call site that "
            f"deoptimizes and recompiles, a class loader whose code is unloaded) with fixed work "
            f"(`--calls {self.info.get('java_calls', '?')}`) on OpenJDK 17 under `perf record -N -k 1 "
            f"-e cpu-clock -F 1000`, {self.info.get('java_rounds', '?')} rounds, the order of the "
            f"pipelines alternating, after an untimed warm-up run. **code-regions**: "
            f"`-agentpath:libperfjit-jvmti.so`, then `perf report`. **perf-agent**: "
            f"`-agentpath:libperf-jvmti.so` (jitdump), `perf inject --jit`, `perf report`. "
            f"**none**: no agent. **idle-***: the same agent (or none) loaded, and nobody "
            f"recording: the JVM alone. JVM: the JVM's wall time, with `perf record` but for "
            f"idle-* (median, and the range of the rounds). Disk: perf.data files, "
            f"jitdump, the jitted `.so` files and side files. Named: samples in JIT code "
            f"(`perf script -G`) that resolve to a symbol. Inlined: `DW_TAG_inlined_subroutine` "
            f"entries in the JIT's files.")
        if self.info.get("java_note"):
            md.append("")
            md.append(self.info["java_note"])
        md.append("")
        rt = Runs(ok, "jvm_s")
        by, m, spread = rt.by, rt.m, rt.spread
        rows = []
        for pipe in ("code-regions", "perf-agent", "none", "idle-code-regions",
                     "idle-perf-agent", "idle-none"):
            if pipe not in by:
                continue
            js, jn = m(pipe, "jit_samples"), m(pipe, "named")
            rows.append([pipe, fmt(m(pipe, "jvm_s"), 2, " s") + spread(pipe),
                         fmt(m(pipe, "inject_s"), 2, " s"),
                         fmt(m(pipe, "report_s"), 2, " s"), fmt(m(pipe, "total_s"), 2, " s"),
                         fmt(m(pipe, "disk_kb"), 0, " KiB"), fmt(m(pipe, "jit_files"), 0),
                         f"{100 * jn / js:.1f}%" if js else "–", fmt(m(pipe, "inlined"), 0)])
        md.append(table(["pipeline", "JVM", "inject", "report", "record to report", "disk",
                         "JIT files", "JIT samples named", "inlined calls"], rows))
        cr, pa = "code-regions", "perf-agent"
        self.overhead_target(names[0], ok, self.java_icount, "jvm_s", cr, pa, 1.10,
                             " of perf's agent")
        if cr in by and pa in by:
            # From a finished recording to the report: inject + report.
            post = lambda p: (m(p, "inject_s") or 0) + (m(p, "report_s") or 0)
            e2e = ratio(post(pa), post(cr))
            whole = ratio(m(pa, "total_s"), m(cr, "total_s"))
            disk = ratio(m(cr, "disk_kb"), m(pa, "disk_kb"))
            share = rt.share
            self.targets.append((names[1], f"{fmt_ratio(e2e)} faster ({fmt_ratio(whole)} with "
                                 f"the recorded JVM run, the same in both)",
                                 "PASS" if e2e and e2e >= 5 else "MISS"))
            self.targets.append((names[2], f"{fmt_ratio(disk)} of perf's agent's",
                                 "PASS" if disk and disk <= 0.5 else "MISS"))
            self.targets.append((names[3], f"{100 * share(cr):.1f}% against {100 * share(pa):.1f}%",
                                 "PASS" if share(cr) >= share(pa) else "MISS"))
            self.targets.append((names[4], f"{fmt(m(cr, 'inlined'), 0)} against {fmt(m(pa, 'inlined'), 0)}",
                                 "PASS" if (m(cr, "inlined") or 0) > 0 and not m(pa, "inlined") else "MISS"))
        else:
            self.targets += [(n, "a pipeline failed", "MISS") for n in names[1:5]]
        md += self.overhead_note(self.java_icount, "jvm_s",
                                 (cr, pa, "idle-code-regions", "idle-perf-agent", "idle-none"),
                                 "JVM")
        self.overhead_target(names[5], ok, self.java_icount, "jvm_s", "idle-code-regions",
                             "idle-none", 1.02, other="idle-perf-agent", other_name="perf's agent")
        return "\n".join(md)

    def section_node(self):
        md = ["## 8. Node.js: perfjit-node against V8's perf flags", "", TCG_NOTE, ""]
        names = ["Node under a recording with perfjit-node within 1.10x of --perf-basic-prof",
                 "Node: JIT samples named right, at least as many as --perf-prof + inject, "
                 "more than --perf-basic-prof where V8 reused freed code's addresses",
                 "Node: perfjit-node loaded and nobody recording within 1.02x of no flag"]
        ok = [r for r in self.node if r["status"] == "ok"]
        if not ok:
            return self.not_measured(md, names, "no node in the guest, perfjit-node not built, "
                                     "or every run failed")
        i = self.info
        md.append(
            f"The Node workload (`demo/node/workload.js`: hot functions, a deoptimization, "
            f"{i.get('node_churn_rounds', '?')} rounds of 50 functions compiled, run and dropped, "
            f"each followed by a full collection, `--expose-gc`) with fixed work (`--iterations "
            f"{i.get('node_iters', '?')}`) on Node {i.get('node', '?')} under "
            f"`perf record -N -k 1 -e cpu-clock -F 1000`, {i.get('node_rounds', '?')} "
            f"rounds, the order of the pipelines alternating, after an untimed warm-up run. "
            f"**addon**: `node -r perfjit-node`, then `perf report`. **basic-prof**: "
            f"`--perf-basic-prof` (perf-PID.map), `perf report`. **perf-prof**: `--perf-prof` "
            f"(jitdump), `perf inject --jit`, `perf report`. **none**: no flag. **idle-***: the "
            f"addon (or nothing) loaded, and nobody recording. Node: the workload's wall time, "
            f"with `perf record` but for idle-* (median, and the range of the rounds). Disk: "
            f"perf.data files, perf-PID.map, jitdump, the jitted `.so` files and side files. "
            f"Named: node's samples in JIT code (`perf script -G --comms node`) that resolve to a "
            f"symbol. Wrong: samples in churned code named after a function that did not run "
            f"then (the workload logs which ran when): a name that the address had before.")
        md.append("")
        rt = Runs([r for r in ok if not r["pipeline"].startswith("start-")], "node_s")
        rows = []
        for pipe in ("addon", "basic-prof", "perf-prof", "none", "idle-addon", "idle-none"):
            if pipe not in rt.by:
                continue
            js = rt.m(pipe, "jit_samples")
            churn = (rt.m(pipe, "churn_right") or 0) + (rt.m(pipe, "churn_wrong") or 0)
            rows.append([pipe, fmt(rt.m(pipe, "node_s"), 2, " s") + rt.spread(pipe),
                         fmt(rt.m(pipe, "inject_s"), 2, " s"), fmt(rt.m(pipe, "report_s"), 2, " s"),
                         fmt(rt.m(pipe, "total_s"), 2, " s"), fmt(rt.m(pipe, "disk_kb"), 0, " KiB"),
                         fmt(rt.m(pipe, "jit_files"), 0),
                         f"{100 * rt.share(pipe):.1f}%" if js else "–",
                         f"{fmt(rt.m(pipe, 'churn_wrong'), 0)} of {churn:.0f}" if js else "–"])
        md.append(table(["pipeline", "Node", "inject", "report", "record to report", "disk",
                         "JIT files", "JIT samples named", "churned code named wrong"], rows))
        for where, rows, info in (("", ok, i), ("; in the instruction-counting guest",
                                                 self.icount_rows(self.node_icount),
                                                 self.icount_info)):
            starts = Runs([r for r in rows if r["pipeline"].startswith("start-") and
                           r["status"] == "ok"], "node_s")
            if not starts.by:
                continue
            ms = {p: starts.m(p, "node_s") for p in ("start-addon", "start-basic-prof",
                                                     "start-none")}
            md.append("")
            md.append(f"Node's start (`node -e 0`, nobody recording, median of "
                      f"{info.get('node_starts', '?')}{where}): " +
                      ", ".join(f"{p[6:]} {1000 * v:.0f} ms" for p, v in ms.items() if v) +
                      ". What the addon adds to it is paid once per process.")
        self.overhead_target(names[0], ok, self.node_icount, "node_s", "addon", "basic-prof",
                             1.10, " of --perf-basic-prof")
        if all(p in rt.by for p in ("addon", "perf-prof", "basic-prof")):
            # Named right: named, less those named after another function.
            def right(p):
                js = rt.m(p, "jit_samples")
                return (rt.m(p, "named") - (rt.m(p, "churn_wrong") or 0)) / js if js else 0
            a, j, b = right("addon"), right("perf-prof"), right("basic-prof")
            reused = (rt.m("basic-prof", "churn_wrong") or 0) > 0
            self.targets.append((names[1], f"{100 * a:.1f}% against {100 * j:.1f}% "
                                 f"(--perf-basic-prof {100 * b:.1f}%, "
                                 f"{fmt(rt.m('basic-prof', 'churn_wrong'), 0)} samples named after "
                                 f"the function before)",
                                 "PASS" if a >= j and (a > b or not reused) else "MISS"))
        else:
            self.targets.append((names[1], "a pipeline failed", "MISS"))
        md += self.overhead_note([r for r in self.node_icount
                                  if not r["pipeline"].startswith("start-")],
                                 "node_s", ("addon", "basic-prof", "idle-addon", "idle-none"),
                                 "Node")
        self.overhead_target(names[2], ok, self.node_icount, "node_s", "idle-addon", "idle-none",
                             1.02)
        return "\n".join(md)

    # ---- the document ----
    def markdown(self):
        sections = [self.section_mapcost(), self.section_announce(), self.section_e2e(),
                    self.section_slowdown(), self.section_report(), self.section_wx(),
                    self.section_attach(),
                    self.section_java(), self.section_node()]
        i = self.info
        head = ["# mmap3 benchmarks", ""]
        if i.get("quick") == "1":
            head += ["**Quick run (BENCH_QUICK=1): tiny counts, a smoke test; the figures are not "
                     "meaningful.**", ""]
        head += [
            f"Run {i.get('date', '?')} by `make bench` (bench/run, bench/in-vm, bench/report.py); "
            f"the in-VM part took {fmt(num(i.get('elapsed_s')), 0)} s" +
            (f"; the overhead runs, in a second boot whose clock counts instructions, took "
             f"{fmt(num(self.icount_info.get('elapsed_s')), 0)} s of that clock."
             if self.icount_info.get("clock") == "icount" else "."),
            "",
            TCG_NOTE,
            "",
            table(["", ""], [
                ["guest kernel", f"`{i.get('kernel', '?')}`"],
                ["machine", f"{i.get('virt', '?')}; {i.get('cpus', '?')} vCPUs ({i.get('cpu', '?')}), "
                            f"{i.get('mem_mb', '?')} MiB"],
                ["kernel debug options", (i.get("kernel_debug") or "none found") +
                 (" (lockdep: kernel paths cost more than in a production kernel)"
                  if "LOCKDEP" in i.get("kernel_debug", "") else "")],
                ["perf", f"`{i.get('perf', '?')}`"],
                ["counts", f"mapping: {i.get('map_rounds', '?')} rounds x {i.get('map_iters', '?')} mmap, "
                           f"{i.get('dl_iters', '?')} dlopen; build-id: {i.get('bid_files', '?')} files; "
                           f"announce: {i.get('ann_rounds', '?')} rounds x {i.get('ann_funcs', '?')}; "
                           f"end to end: {i.get('e2e_sizes', '?').replace(' ', ', ')} functions; "
                           f"slowdown: {i.get('sd_rounds', '?')} x {i.get('sd_funcs', '?')} functions; "
                           f"report: {i.get('rt_iters', '?')} mmaps, {i.get('rt_runs', '?')} runs; "
                           f"W^X: {i.get('wx_funcs', '?')} functions; "
                           f"attach: {i.get('att_sizes', '?').replace(' ', ', ')} functions; "
                           f"Java: {i.get('java_rounds', '?')} rounds, --calls {i.get('java_calls', '?')}; "
                           f"Node: {i.get('node_rounds', '?')} rounds, --iterations {i.get('node_iters', '?')}"],
            ]),
            "",
            "## Targets",
            "",
            TCG_NOTE,
            "",
            table(["target", "measured", "verdict"], [[n, m, f"**{v}**"] for n, m, v in self.targets]),
            "",
            "![results](results.png)",
            "",
        ]
        return "\n".join(head + ["\n\n".join(sections), ""])

    # ---- the plot ----
    def plot(self, path):
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(2, 4, figsize=(22, 10))
        axes = axes.flatten()
        quick = " (QUICK)" if self.info.get("quick") == "1" else ""
        where = "QEMU TCG guest" if self.info.get("accel", "tcg") == "tcg" else "one machine"
        fig.suptitle("mmap3 benchmarks" + quick + f" - {where}: ratios count, absolute times do not",
                     fontsize=14)

        def bars(ax, labels, values, title, ylabel, line=None, colors=None, fmt_=None):
            xs = range(len(labels))
            vals = [v if v is not None else 0 for v in values]
            b = ax.bar(xs, vals, color=colors)
            ax.set_xticks(list(xs))
            ax.set_xticklabels(labels, rotation=30, ha="right", fontsize=8)
            ax.set_title(title, fontsize=10)
            ax.set_ylabel(ylabel)
            if line is not None:
                ax.axhline(line, color="red", linestyle="--", linewidth=1)
            for rect, v in zip(b, values):
                if v is not None:
                    ax.annotate((fmt_ or (lambda x: f"{x:.2f}"))(v),
                                (rect.get_x() + rect.get_width() / 2, rect.get_height()),
                                ha="center", va="bottom", fontsize=7)
            return b

        def nodata(ax, title):
            ax.set_title(title, fontsize=10)
            ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
            ax.set_xticks([])
            ax.set_yticks([])

        # (a) mapping cost ratios
        ax = axes[0]
        if self.mapcost:
            meds, _ = self.mapcost_medians()
            modes = [m for m in MAP_MODES if ("mmap", m) in meds]
            w = 0.38
            for k, (op, col) in enumerate([("mmap", "tab:blue"), ("dlopen", "tab:orange")]):
                vals = [self.mapcost_paired(op, m)[0] or 0 for m in modes]
                xs = [x + (k - 0.5) * w for x in range(len(modes))]
                ax.bar(xs, vals, w, label=op, color=col)
            ax.set_xticks(range(len(modes)))
            ax.set_xticklabels([MODE_LABEL[m] for m in modes], rotation=30, ha="right", fontsize=8)
            ax.axhline(1.10, color="red", linestyle="--", linewidth=1, label="target 1.10")
            ax.set_title("1. mapping cost, ratio to MMAP2+build_id", fontsize=10)
            ax.legend(fontsize=7)
        else:
            nodata(ax, "1. mapping cost")

        # (b) build-id share
        ax = axes[1]
        if self.buildid:
            labels = [f"{MODE_LABEL.get(r['mode'], r['mode'])}\n{r['fs']} {r['cache']}"
                      for r in self.buildid]
            vals = [100 * int(r["correct"]) / int(r["files"]) if int(r["files"]) else None
                    for r in self.buildid]
            bars(ax, labels, vals, "1. build-id in record after cache drop", "% of ELF mappings",
                 line=100, colors=["tab:green" if r["mode"] == "mmap3" else "tab:gray" for r in self.buildid],
                 fmt_=lambda x: f"{x:.0f}%")
            ax.set_ylim(0, 110)
        else:
            nodata(ax, "1. build-ids after cache drop")

        # (c) announce
        ax = axes[2]
        if self.announce:
            meds = self.announce_medians()
            modes = [m for m in ANN_MODES if m in meds]
            base = meds.get("perf-map", {}).get("load_ns")
            bars(ax, [MODE_LABEL[m] for m in modes], [ratio(meds[m]["load_ns"], base) for m in modes],
                 "2. announce cost, ratio to a perf-map line", "ratio", line=2.0,
                 colors=["tab:purple" if m.startswith("code") else "tab:gray" for m in modes])
            ax.set_yscale("log")
        else:
            nodata(ax, "2. announce cost")

        # (d), (e) end to end time and disk
        by = {(int(r["functions"]), r["pipeline"]): r for r in self.e2e}
        sizes = sorted({k[0] for k in by})
        for ax, key, title, ylabel, scale in [
                (axes[3], "total_s", "3. end to end: record -> report", "seconds (log)", 1),
                (axes[4], "disk_kb", "3. end to end: disk (perf.data + JIT files)", "MiB (log)", 1 / 1024)]:
            if not sizes:
                nodata(ax, title)
                continue
            w = 0.27
            colors = {"mmap3": "tab:green", "jitdump": "tab:red", "perf-map": "tab:gray"}
            for k, p in enumerate(E2E_PIPES):
                xs, vals, hatches = [], [], []
                for x, n in enumerate(sizes):
                    r = by.get((n, p))
                    v = num(r[key]) if r else None
                    if v is None or v <= 0:
                        continue
                    xs.append(x + (k - 1) * w)
                    vals.append(v * scale)
                    hatches.append(r["status"] != "ok")
                b = ax.bar(xs, vals, w, label=p, color=colors[p])
                for rect, cut in zip(b, hatches):
                    if cut:
                        rect.set_hatch("//")
                        ax.annotate("cut", (rect.get_x() + rect.get_width() / 2, rect.get_height()),
                                    ha="center", va="bottom", fontsize=7)
            ax.set_yscale("log")
            ax.set_xticks(range(len(sizes)))
            ax.set_xticklabels([f"{n:,} fns" for n in sizes], fontsize=8)
            ax.set_title(title, fontsize=10)
            ax.set_ylabel(ylabel)
            ax.legend(fontsize=7)

        # (f) slowdown
        ax = axes[5]
        if self.slowdown:
            by_m = defaultdict(list)
            for r in self.slowdown:
                c, a = num(r["compile_us"]), num(r["announce_us"])
                by_m[r["mode"]].append(c + a if c is not None and a is not None else None)
            modes = [m for m in SD_MODES if m in by_m]
            bars(ax, modes, [med(by_m[m]) for m in modes], "4. perfjit-calc compile+announce",
                 "us per function", colors=["tab:green" if m == "mmap3" else "tab:gray" for m in modes])
        else:
            nodata(ax, "4. workload slowdown")

        # (g) report throughput
        ax = axes[6]
        if self.report:
            by_m = defaultdict(list)
            for r in self.report:
                if r["status"] == "ok":
                    by_m[r["mode"]].append(num(r["report_s"]))
            modes = [m for m in ("mmap3", "no-mmap3") if by_m.get(m)]
            base = med(by_m.get("no-mmap3", []))
            bars(ax, [MODE_LABEL[m] for m in modes], [ratio(med(by_m[m]), base) for m in modes],
                 "5. perf report time, ratio to MMAP2", "ratio", line=1.10,
                 colors=["tab:green" if m == "mmap3" else "tab:gray" for m in modes])
        else:
            nodata(ax, "5. report throughput")

        # (h) targets
        ax = axes[7]
        ax.axis("off")
        ax.set_title("targets", fontsize=10)
        y = 0.95
        for n, m, v in self.targets:
            ax.text(0.0, y, f"{v}", color="green" if v == "PASS" else "red", fontsize=9,
                    fontweight="bold", transform=ax.transAxes, va="top")
            ax.text(0.14, y, f"{n}\n{m}", fontsize=7, transform=ax.transAxes, va="top", wrap=True)
            y -= 0.19
        fig.tight_layout(rect=(0, 0, 1, 0.95))
        fig.savefig(path, dpi=90)
        plt.close(fig)


def main():
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    raw = sys.argv[1]
    out = sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
    res = Results(raw)
    if res.empty():
        print(f"report.py: no results in {raw}", file=sys.stderr)
        return 1
    os.makedirs(out, exist_ok=True)
    md = res.markdown()
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write(md)
    res.plot(os.path.join(out, "results.png"))
    print(f"report.py: wrote {out}/results.md and results.png")
    for n, m, v in res.targets:
        print(f"  {v:4}  {n}: {m}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
