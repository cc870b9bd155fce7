"""The shoal program of ``shoal bench soak`` (one job; :mod:`.cli` starts them).

``python -m shoal run -n P program.py SEED SECONDS ROUNDS OUT LB PERIOD``: an Array of
cells that call each other (chains of calls of random length, with ints, small and
large arrays and nested values), broadcast, reduce, all-reduce, stream on channels and
answer futures while they move: by ``arr.migrate`` (from main and from the cells, at
random times), and by at_sync rounds of the job's strategy (``SHOAL_LB``) at random
rounds. Every choice comes from ``SEED``; every handler spins a random time, so the
order in which messages arrive changes from run to run.

Main runs rounds until ``SECONDS`` passed (or ``ROUNDS`` rounds, if not 0). At random
rounds, and after the last, it waits for quiescence and checks every invariant the
runtime promises (the list is in :func:`check`); a broken one is printed with the seed
and the job exits with code 3. The job's counts go to ``OUT`` as one JSON object.
"""

from __future__ import annotations

import functools
import json
import random
import sys
import time
import zlib
from collections import Counter
from typing import Any

import numpy as np

import shoal

MAIN = -1  # the sender number of main's calls and broadcasts
M64 = (1 << 64) - 1
LARGE = 40_000  # int64s in a large array: 320 kB, above the 256 KiB rendezvous threshold
EXIT_BROKEN = 3  # a broken invariant


def mix(*xs: int) -> int:
    """A 64-bit hash of some ints (the same on every PE and in every run)."""
    h = 0xCBF29CE484222325
    for x in xs:
        h = ((h ^ (x & M64)) * 0x100000001B3) & M64
        h ^= h >> 29
        h = (h * 0xBF58476D1CE4E5B9) & M64
        h ^= h >> 32
    return h


def make_payload(kind: int, src: int, seq: int, length: int) -> Any:
    """What message ``seq`` from ``src`` carries: its content follows from the two."""
    base = mix(src, seq) % 1_000_003
    if kind == 0:
        return base
    if kind == 1:
        return np.arange(length, dtype=np.int64) + base
    if kind == 2:
        return np.arange(LARGE, dtype=np.int64) * 3 + base
    return ("nested", {"src": src, "seq": seq, "h": [base, base + 1]}, (np.float64(base),))


def payload_ok(src: int, seq: int, p: Any) -> bool:
    base = mix(src, seq) % 1_000_003
    if type(p) is int:
        return p == base
    if isinstance(p, np.ndarray):
        if p.dtype != np.int64 or p.ndim != 1:
            return False
        step = 3 if p.size == LARGE else 1
        return bool(np.array_equal(p, np.arange(p.size, dtype=np.int64) * step + base))
    return (isinstance(p, tuple) and len(p) == 3 and p[0] == "nested"
            and p[1] == {"src": src, "seq": seq, "h": [base, base + 1]} and float(p[2][0]) == float(base))


def chan_payload(src: int, cseq: int) -> np.ndarray:
    return np.full(1 + cseq % 7, mix(7, src, cseq) % 999_983, np.int64)


class Stream:
    """What a receiver knows of one sender's numbered messages: exactly once (every
    number up to ``lo`` arrived, and the numbers in ``extra``: a gap below them), and in
    order within each *stay* of the sender (its time on one PE between two moves, where
    the runtime's per-sender order holds): ``stays`` maps a stay to the last number from
    it. ``crossed`` counts messages that arrived after a later one."""

    __slots__ = ("lo", "extra", "stays", "top", "crossed")

    def __init__(self) -> None:
        self.lo, self.top, self.crossed = 0, 0, 0
        self.extra: set[int] = set()
        self.stays: dict[int, int] = {}

    def take(self, seq: int, stay: int | None = None, first: int = 1) -> str | None:
        """Note message ``seq`` (sent in ``stay``, whose first message was ``first``);
        what is wrong with it, or None."""
        if seq <= self.lo or seq in self.extra:
            return "delivered twice"
        if seq == self.lo + 1:
            lo = seq
            while lo + 1 in self.extra:
                self.extra.remove(lo + 1)
                lo += 1
            self.lo = lo
        else:
            self.extra.add(seq)
        if seq < self.top:
            self.crossed += 1
        self.top = max(self.top, seq)
        if stay is not None:
            last = self.stays.get(stay)
            self.stays[stay] = seq
            if last is None and seq != first:
                return f"came before {first}, the first its sender sent from that PE"
            if last is not None and seq != last + 1:
                return f"came after {last}, sent from the same PE: out of order"
        return None

    def settle(self) -> None:
        """At quiescence: keep the sender's last stay only."""
        if len(self.stays) > 1:
            stay = max(self.stays)
            self.stays = {stay: self.stays[stay]}


def _answered(proxy: Any, token: int, f: Any) -> None:
    proxy.answered(token, f.result())


def _allreduced(proxy: Any, r: int, f: Any) -> None:
    proxy.allreduced(r, f.result())


class Cell(shoal.Chare):
    """One element: counts what it sends and checks what it receives, as it arrives."""

    def __init__(self, cfg: dict):
        i = self.index[0]
        n = cfg["n"]
        self.cfg = cfg
        self.rng = random.Random(mix(cfg["seed"], i))
        self.heavy = 4.0 if self.rng.random() < 0.3 else 1.0  # uneven loads: strategies move cells
        self.hops = 0  # moves so far (migrated() calls): a sender's stay on one PE
        # point-to-point calls: per receiver, the last number sent, the stay it began, its first number there
        self.sent: dict[int, int] = {}
        self.pair_ep: dict[int, int] = {}
        self.pair_first: dict[int, int] = {}
        self.calls: dict[int, Stream] = {}  # per sender
        self.hash_sent = 0
        self.hash_recv = 0
        # broadcasts
        self.bsent = 0
        self.bcasts: dict[int, Stream] = {}  # per sender
        # futures
        self.pending: dict[int, tuple] = {}  # token -> (the value expected, how it was asked, of whom)
        self.tokens = 0
        self.answered_n = 0
        self.allreduced_n = 0
        # channels: cells[i] -> cells[i + 1], port i
        self.cout = shoal.Channel(self, remote=self.collection[(i + 1) % n], port=i)
        self.cin = shoal.Channel(self, remote=self.collection[(i - 1) % n], port=(i - 1) % n)
        self.csent = 0
        self.chan_ep = -1
        self.chan_first = 0
        self.chan = Stream()  # what came from the previous cell's channel
        # state that must survive moves: an array updated by each event, its total, and a
        # running CRC of the events with their log since the last check
        size = LARGE if self.rng.random() < cfg["p_big_state"] else self.rng.randrange(1, 2000)
        self.blob = np.zeros(size, np.int64)
        self.blob_total = 0
        self.digest = 0
        self.digest_base = 0
        self.log: list = []
        self.rounds_seen = 0
        self.last_round = -1
        self.syncs = 0
        self.resumes = 0
        self.migrate_requests = 0
        self.checked = 0
        self.violations: list[str] = []
        self.done: Any = None

    # -- helpers -----------------------------------------------------------------------
    def _bad(self, what: str) -> None:
        if len(self.violations) < 20:
            self.violations.append(f"cell {self.index[0]} on PE {shoal.my_pe()}: {what}")

    def _spin(self) -> None:
        end = time.perf_counter() + self.rng.random() * self.cfg["spin_us"] * self.heavy * 1e-6
        while time.perf_counter() < end:
            pass

    def _note(self, kind: int, src: int, seq: int) -> None:
        """Fold one event into the state that must travel intact."""
        self.digest = zlib.crc32(b"%d,%d,%d;" % (kind, src, seq), self.digest)
        self.log.append((kind, src, seq))
        self.blob[(mix(kind, src, seq) % self.blob.size)] += src + 2
        self.blob_total += src + 2

    def _send(self, dst: int, ttl: int) -> None:
        me = self.index[0]
        seq = self.sent[dst] = self.sent.get(dst, 0) + 1
        if self.pair_ep.get(dst) != self.hops:
            self.pair_ep[dst] = self.hops
            self.pair_first[dst] = seq
        self.hash_sent += mix(1, me, dst, seq)
        rng = self.rng
        u = rng.random()
        kind = 2 if u < self.cfg["p_large"] else 0 if u < 0.4 else 1 if u < 0.85 else 3
        payload = make_payload(kind, me, seq, rng.randrange(1, 64))
        self.collection[dst].msg(me, seq, self.hops, self.pair_first[dst], ttl, payload)
        if self.cfg["inject"] == "dup" and seq == 3:  # the checker's own test: one call twice
            self.collection[dst].msg(me, seq, self.hops, self.pair_first[dst], 0, payload)

    def _act(self, ttl: int) -> None:
        """What a cell does after each message: calls on, moves cells, broadcasts,
        streams, asks: each at the job's rates."""
        rng, cfg, me = self.rng, self.cfg, self.index[0]
        n = cfg["n"]
        if ttl > 0:
            for _ in range(rng.choice((1, 1, 1, 2))):
                self._send(me if rng.random() < cfg["p_self"] else rng.randrange(n), ttl - 1)
        if rng.random() < cfg["p_migrate"]:
            self.migrate_requests += 1
            self.collection.migrate(rng.randrange(n), rng.randrange(cfg["npes"]))
        if rng.random() < cfg["p_bcast"]:
            self.bsent += 1
            self.collection.bnote(me, self.bsent)
        if rng.random() < cfg["p_chan"]:
            self.csent += 1
            if self.chan_ep != self.hops:
                self.chan_ep, self.chan_first = self.hops, self.csent
            self.cout.send(self.csent, self.hops, self.chan_first, chan_payload(me, self.csent))
        if rng.random() < cfg["p_future"]:
            self._ask(rng.randrange(n))

    def _ask(self, dst: int) -> None:
        self.tokens += 1
        token = self.tokens
        x = self.rng.randrange(1 << 30)
        if self.rng.random() < 0.5:
            f = self.collection[dst].ask(x, ret=True)
            self.pending[token] = (3 * x + 1, "ask(ret=True)", dst, shoal.my_pe())
        else:
            f = shoal.Future()
            self.collection[dst].fill(f, x)
            self.pending[token] = (5 * x + 2, "a Future sent to fill()", dst, shoal.my_pe())
        f.add_done_callback(functools.partial(_answered, self.proxy, token))

    # -- entry methods -------------------------------------------------------------------
    def migrated(self) -> None:
        self.hops += 1
        if self.cfg["inject"] == "state" and self.hops == 1:  # the checker's own test: damage the state once
            self.blob[0] += 1

    def msg(self, src: int, seq: int, ep: int, first: int, ttl: int, payload: Any) -> None:
        me = self.index[0]
        if self.cfg["inject"] == "drop" and src == me and seq == 3:  # the checker's own test: lose a call
            return
        self.hash_recv += mix(1, src, me, seq)
        stream = self.calls.get(src)
        if stream is None:
            stream = self.calls[src] = Stream()
        wrong = stream.take(seq, ep, first)
        if wrong:
            self._bad(f"call {seq} from {src} (its stay {ep}) {wrong}")
        if not payload_ok(src, seq, payload):
            self._bad(f"call {seq} from {src}: payload damaged ({type(payload).__name__})")
        self.checked += 3
        self._note(1, src, seq)
        self._spin()
        self._act(ttl)

    def bnote(self, src: int, bseq: int) -> None:
        stream = self.bcasts.get(src)
        if stream is None:
            stream = self.bcasts[src] = Stream()
        # main never moves: its broadcasts arrive in order (one stay, the whole job)
        wrong = stream.take(bseq, 0 if src == MAIN else None)
        if wrong:
            self._bad(f"broadcast {bseq} from {'main' if src == MAIN else src} {wrong}")
        self.checked += 1
        self._note(2, src, bseq)
        self._spin()

    def ask(self, x: int) -> int:
        self._spin()
        return 3 * x + 1

    def fill(self, f: Any, x: int) -> None:
        self._spin()
        f.send(5 * x + 2)

    def answered(self, token: int, value: int) -> None:
        expected = self.pending.pop(token, None)
        if expected is None:
            self._bad(f"future {token} resolved twice (or never asked)")
        elif value != expected[0]:
            self._bad(f"future {token} ({expected[1]} of cell {expected[2]}) resolved to {value}, not {expected[0]}")
        self.answered_n += 1
        self.checked += 1
        self._note(3, token, value & 0xFFFF)

    def allreduced(self, r: int, value: int) -> None:
        n = self.cfg["n"]
        if value != n * (n + 1) // 2:
            self._bad(f"all-reduce of round {r} gave {value}, not {n * (n + 1) // 2}")
        self.allreduced_n += 1
        self.checked += 1

    def round(self, r: int, sync: bool, sends: int, ttl: int, done: Any) -> None:
        if r != self.last_round + 1:
            self._bad(f"round {r} broadcast came after round {self.last_round}")
        self.last_round = r
        self.rounds_seen += 1
        self.checked += 1
        self._note(4, r, 0)
        self._spin()
        rng, me, n = self.rng, self.index[0], self.cfg["n"]
        for _ in range(sends):
            self._send(me if rng.random() < self.cfg["p_self"] else rng.randrange(n), rng.randrange(ttl + 1))
        self._act(0)
        self.allreduce(me + 1).add_done_callback(functools.partial(_allreduced, self.proxy, r))
        self.done = done
        if sync:
            self.syncs += 1
            self.at_sync()
        else:
            self._contribute()

    def resume_from_sync(self) -> None:
        self.resumes += 1
        self._note(5, self.syncs, self.resumes)
        self._contribute()

    def _contribute(self) -> None:
        self.contribute(np.array([self.index[0] + 1, self.last_round + 1, 1], np.int64), shoal.reducers.sum, self.done)

    def state(self) -> dict:
        """This cell's counts, after checking the state it carries (at quiescence)."""
        if self.blob.dtype != np.int64 or not self.blob.flags.writeable or int(self.blob.sum()) != self.blob_total:
            self._bad(f"state array damaged: sum {int(self.blob.sum())}, recorded {self.blob_total}")
        d = self.digest_base
        for kind, src, seq in self.log:
            d = zlib.crc32(b"%d,%d,%d;" % (kind, src, seq), d)
        if d != self.digest:
            self._bad("the CRC of its history does not match its log")
        self.log = []
        self.digest_base = self.digest
        for what, streams in (("calls", self.calls), ("broadcasts", self.bcasts)):
            for src, stream in streams.items():
                if stream.extra:
                    self._bad(f"{what} from {src} missing: received 1..{stream.lo} and {sorted(stream.extra)[:5]}")
                stream.settle()
        self.checked += 4
        for token, (_, how, dst, pe) in self.pending.items():
            self._bad(f"future {token} ({how} of cell {dst}, made on PE {pe}) not resolved at quiescence")
        problems, self.violations = self.violations, []
        return {
            "index": self.index[0], "pe": shoal.my_pe(), "sent": dict(self.sent),
            "recv": {src: st.lo for src, st in self.calls.items()}, "crossed": sum(st.crossed for st in self.calls.values()),
            "bsent": self.bsent, "brecv": {src: st.lo for src, st in self.bcasts.items()},
            "bcrossed": sum(st.crossed for st in self.bcasts.values()),
            "hs": self.hash_sent, "hr": self.hash_recv, "problems": problems, "hops": self.hops,
            "pending": len(self.pending), "asked": self.tokens, "answered": self.answered_n,
            "allreduced": self.allreduced_n, "rounds": self.rounds_seen, "syncs": self.syncs,
            "resumes": self.resumes, "csent": self.csent, "migrate_requests": self.migrate_requests,
            "checked": self.checked,
        }

    async def drain(self, expected: list) -> tuple:
        """Receive what the channel from the previous cell holds (all of it is in: this
        runs at quiescence), checking numbers and contents."""
        want = expected[self.index[0]]
        src = (self.index[0] - 1) % self.cfg["n"]
        stream = self.chan
        crossed = stream.crossed
        for _ in range(want - stream.lo - len(stream.extra)):
            cseq, ep, first, data = await self.cin.recv()
            wrong = stream.take(cseq, ep, first)
            if wrong:
                self._bad(f"channel message {cseq} from {src} (its stay {ep}) {wrong}")
            elif stream.crossed > crossed:
                self._bad(f"channel message {cseq} from {src} (its stay {ep}) came after message {stream.top}, "
                          "sent later from another PE: a channel's order broke across its sender's move")
            crossed = stream.crossed
            if not np.array_equal(data, chan_payload(src, cseq)):
                self._bad(f"channel message {cseq} from {src}: payload damaged")
            self.checked += 2
            self._note(6, src, cseq)
        if stream.extra:
            self._bad(f"channel messages from {src} missing: received 1..{stream.lo} and {sorted(stream.extra)[:5]}")
        stream.settle()
        problems, self.violations = self.violations, []
        return self.index[0], stream.lo, problems


class Soak:
    """Main's side: the rounds, its own calls and broadcasts, and the checks."""

    def __init__(self, seed: int, seconds: float, rounds: int, lb: str, period: int, inject: str):
        self.seed, self.seconds, self.max_rounds, self.lb, self.period = seed, seconds, rounds, lb, period
        rng = random.Random(seed)
        npes = shoal.num_pes()
        self.n = n = max(4, rng.randint(2 * npes, 10 * npes))
        self.cfg = {
            "seed": seed, "n": n, "npes": npes, "inject": inject,
            "spin_us": rng.choice((10, 50, 200, 500)),
            "p_self": rng.choice((0.1, 0.3, 0.5)),
            "p_migrate": rng.choice((0.002, 0.01, 0.03)),
            "p_bcast": rng.choice((0.005, 0.02)),
            "p_chan": rng.choice((0.05, 0.2, 0.5)),
            "p_future": rng.choice((0.02, 0.1, 0.3)),
            "p_large": rng.choice((0.0, 0.002, 0.01)),
            "p_big_state": rng.choice((0.0, 0.1)),
        }
        self.p_sync = rng.choice((0.2, 0.5, 0.8))
        self.p_check = rng.choice((0.15, 0.3, 0.6))
        self.max_sends = rng.randint(1, 6)
        self.max_ttl = rng.randint(0, 6)
        self.cells = shoal.Array(Cell, n, args=(self.cfg,))
        self.main_sent: dict[int, int] = {}
        self.main_hash = 0
        self.main_bcasts = 0
        self.main_migrates = 0
        self.syncs = 0
        self.balancing = 0
        self.checks = 0  # invariants main checked
        self.check_rounds = 0
        self.last: dict = {}
        self.drained = [0] * n
        self.problems: list[str] = []

    def run(self) -> int:
        cells, n, npes = self.cells, self.n, shoal.num_pes()
        t0 = time.perf_counter()
        r = 0
        while True:
            rr = random.Random(mix(self.seed, r))
            sync = rr.random() < self.p_sync
            if sync:
                self.syncs += 1
                if self.period == 0 or self.syncs % self.period == 0:
                    self.balancing += 1
            done = shoal.Future()
            cells.round(r, sync, rr.randint(0, self.max_sends), self.max_ttl, done)
            for _ in range(rr.randrange(4)):
                self.main_migrates += 1
                cells.migrate(rr.randrange(n), rr.randrange(npes))
            for _ in range(rr.randrange(5)):
                self._main_call(rr, rr.randrange(n))
            if rr.random() < 0.3:
                self.main_bcasts += 1
                cells.bnote(MAIN, self.main_bcasts)
            total = done.get()
            want = [n * (n + 1) // 2, n * (r + 1), n]
            self.checks += 1
            if [int(v) for v in total] != want:
                self.problems.append(f"round {r}: the reduction gave {list(total)}, not {want}")
            for _ in range(rr.randrange(3)):  # moves while the round's chains of calls go on
                self.main_migrates += 1
                cells.migrate(rr.randrange(n), rr.randrange(npes))
            elapsed = time.perf_counter() - t0
            last = (self.max_rounds and r + 1 >= self.max_rounds) or (not self.max_rounds and elapsed >= self.seconds)
            if last or rr.random() < self.p_check:
                self.check(r)
            if self.problems:
                self.rounds = r + 1
                return r
            r += 1
            if last:
                self.rounds = r
                return r - 1

    def _main_call(self, rr: random.Random, dst: int) -> None:
        seq = self.main_sent[dst] = self.main_sent.get(dst, 0) + 1
        self.main_hash += mix(1, MAIN, dst, seq)
        kind = rr.choice((0, 1, 3))
        self.cells[dst].msg(MAIN, seq, 0, 1, rr.randrange(self.max_ttl + 1), make_payload(kind, MAIN, seq, rr.randrange(1, 64)))

    def check(self, r: int) -> None:
        """At quiescence: every call, broadcast, channel message and future delivered
        exactly once (and in order where promised), every element exactly once, state
        intact, the cells' own checks clean."""
        n, cells = self.n, self.cells
        self.check_rounds += 1
        shoal.quiescence().get()
        states = cells.state(ret=True).get()
        bad = self.problems.append
        # every element exactly once, on a PE of the job
        indices = sorted(s["index"] for s in states)
        per_pe = Counter(s["pe"] for s in states)
        self.checks += 3
        if indices != list(range(n)):
            bad(f"round {r}: elements {indices}, not each of 0..{n - 1} once")
        if sum(per_pe.values()) != n or not all(0 <= pe < shoal.num_pes() for pe in per_pe):
            bad(f"round {r}: elements per PE {dict(per_pe)} do not add up to {n}")
        by = {s["index"]: s for s in states}
        if len(by) != n:
            return
        senders = [MAIN, *range(n)]
        bsent = {MAIN: self.main_bcasts, **{i: by[i]["bsent"] for i in range(n)}}
        for rcv in range(n):
            s = by[rcv]
            for src in senders:
                sent = self.main_sent.get(rcv, 0) if src == MAIN else by[src]["sent"].get(rcv, 0)
                got = s["recv"].get(src, 0)
                if sent != got:
                    bad(f"round {r}: cell {src} sent {sent} calls to cell {rcv}, which received {got} (in sequence)")
                if s["brecv"].get(src, 0) != bsent[src]:
                    bad(f"round {r}: cell {rcv} received {s['brecv'].get(src, 0)} of the {bsent[src]} broadcasts of {src}")
                self.checks += 2
            unknown = (set(s["recv"]) | set(s["brecv"])) - set(senders)
            if unknown:
                bad(f"round {r}: cell {rcv}: calls or broadcasts from unknown senders {unknown}")
            checks = [
                (s["pending"] == 0, f"{s['pending']} futures never resolved"),
                (s["asked"] == s["answered"], f"asked {s['asked']} futures, answered {s['answered']}"),
                (s["rounds"] == r + 1, f"saw {s['rounds']} round broadcasts, not {r + 1}"),
                (s["allreduced"] == r + 1, f"got {s['allreduced']} all-reduce results, not {r + 1}"),
                (s["syncs"] == s["resumes"], f"called at_sync {s['syncs']} times, resume_from_sync ran {s['resumes']}"),
            ]
            for ok, what in checks:
                self.checks += 1
                if not ok:
                    bad(f"round {r}: cell {rcv}: {what}")
            for p in s["problems"]:
                bad(f"round {r}: {p}")
        self.checks += 1
        hs = self.main_hash + sum(s["hs"] for s in states)
        hr = sum(s["hr"] for s in states)
        if hs != hr:
            bad(f"round {r}: the hashes of the calls sent and received differ ({hs} != {hr})")
        # channels: each holds what its sender sent, in order
        expected = [by[(i - 1) % n]["csent"] for i in range(n)]
        for index, got, problems in cells.drain(expected, ret=True).get():
            self.checks += 1
            if got != expected[index]:
                bad(f"round {r}: cell {index} received {got} channel messages of {expected[index]}")
            for p in problems:
                bad(f"round {r}: {p}")
        self.last = {"states": states, "expected": expected}

    def summary(self, elapsed: float) -> dict:
        states = self.last.get("states", [])
        messages = sum(self.main_sent.values()) + sum(sum(s["sent"].values()) for s in states)
        return {
            "seed": self.seed, "lb": self.lb, "period": self.period, "pes": shoal.num_pes(), "elements": self.n,
            "rounds": getattr(self, "rounds", 0), "check_rounds": self.check_rounds, "messages": messages,
            "broadcasts": self.main_bcasts + sum(s["bsent"] for s in states),
            "channel_messages": sum(s["csent"] for s in states),
            # not broken invariants: arrivals after a message sent later from another PE (the sender moved between)
            "reordered_calls": sum(s["crossed"] for s in states),
            "reordered_broadcasts": sum(s["bcrossed"] for s in states),
            "futures": sum(s["asked"] for s in states),
            "migrations": sum(s["hops"] for s in states),
            "migrate_requests": self.main_migrates + sum(s["migrate_requests"] for s in states),
            "sync_rounds": self.syncs, "balancing_rounds": self.balancing,
            "invariants": self.checks + sum(s["checked"] for s in states),
            "elapsed": round(elapsed, 3), "ok": not self.problems, "problems": self.problems[:50],
        }


def main(args: list) -> None:
    seed, seconds, rounds, out, lb, period = int(args[1]), float(args[2]), int(args[3]), args[4], args[5], int(args[6])
    inject = args[7] if len(args) > 7 else "-"
    t0 = time.perf_counter()
    soak = Soak(seed, seconds, rounds, lb, period, inject)
    r = soak.run()
    summary = soak.summary(time.perf_counter() - t0)
    with open(out, "w") as f:
        json.dump(summary, f)
    if soak.problems:
        print(f"soak: seed {seed}: {len(soak.problems)} broken invariant(s) by round {r} "
              f"(strategy {lb}, period {period}, {shoal.num_pes()} PEs):", file=sys.stderr)
        for p in soak.problems[:20]:
            print("  " + p, file=sys.stderr)
        sys.stderr.flush()
        shoal.exit(EXIT_BROKEN)


if __name__ == "__main__":
    shoal.start(main)
