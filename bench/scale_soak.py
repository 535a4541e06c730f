"""Scale soak (issue 23): three `sessiongate serve` gateways, separate processes with their
own ports and data_dirs, on one PostgreSQL database on loopback, in front of a local stub
model; clients spread over all three; one gateway killed with SIGKILL mid-run and
restarted.

Phases, in order:

1. throughput: a closed loop of `--concurrency` clients (each its own key, turns back to
   back) on 1, then 2, then 3 gateways: turns per second;
2. the soak: `--turns` turns over `--keys` keys (turn n on key n mod keys, each with its
   own `Idempotency-Key`), client w on gateway w mod 3, a failed attempt (refused
   connection, reset, 5xx, 409 for a key still running elsewhere) retried on the next
   gateway; WebSocket listeners on the first `--watched-keys` keys, spread over the three
   gateways, failing over when theirs dies; at `--kill-at` of the turns the third gateway
   is SIGKILLed, and restarted `--down-s` seconds later;
3. the check: every key's stored chain read back from PostgreSQL: each issued message
   stored exactly once (else `lost`, or `duplicated`), each followed at once by its own
   answer (else `interleaved`); every answered turn of a watched key seen by its listener
   (a broadcast, or the history of the `ready` frame after a reconnect; else
   `missed_broadcasts`);
4. quotas (`[quotas]`, when this version has them): three users with a tight
   `requests_per_minute` (PATCH /v1/users/{name}) each send three times that at once,
   spread over the three gateways, inside one UTC minute; `quota_overrun` is the most any
   user had admitted beyond the limit;
5. database work per turn: a fourth gateway whose database.url goes through a counting
   relay (support/pg_counter.py) runs turns alone: statements, round trips and
   transactions per turn.

    /tmp/benchvenv/bin/python bench/scale_soak.py --quick --postgres-url URL   # < 10 min
    /tmp/benchvenv/bin/python bench/scale_soak.py --postgres-url URL           # 3,000 turns

URL: a PostgreSQL server whose role may CREATE DATABASE (`bash scripts/postgres.sh`
prints one; SESSIONGATE_TEST_POSTGRES_URL is used when --postgres-url is not given). A
fresh database is created and dropped.

The last line printed is always
`soak_lost=N soak_duplicated=N soak_interleaved=N soak_missed_broadcasts=N
quota_overrun=N turns_per_s_1=R turns_per_s_3=R` (one line; n/a where a figure is
missing).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from support.common import fmt, machine_busy_seconds, machine_line, run_async
from support.pg_counter import read_counts, serve_pg_counter
from support.procs import start_child, stop_child
from support.soak_cluster import (
    Gateway,
    add_user,
    create_database,
    drop_database,
    make_gateways,
    via_port,
)
from support.soak_load import (
    Clients,
    SoakPlan,
    check_histories,
    closed_loop,
    missed_broadcasts,
    quota_burst,
    quota_overrun,
    soak,
)
from support.soak_stub import serve_soak_stub

HERE = Path(__file__).resolve()
QUOTA_USERS = ("tight1", "tight2", "tight3")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    add = parser.add_argument
    add("--quick", action="store_true", help="a shorter run (under 10 minutes)")
    add("--postgres-url", default=os.environ.get("SESSIONGATE_TEST_POSTGRES_URL"))
    add("--gateways", type=int, default=3)
    add("--turns", type=int, help="soak turns (default 3000; --quick 900)")
    add("--keys", type=int, default=100)
    add("--watched-keys", type=int, default=30, help="keys with a WebSocket listener")
    add("--concurrency", type=int, default=24, help="clients at once")
    add("--throughput-turns", type=int, help="turns per throughput phase (default 900/300)")
    add("--kill-at", type=float, default=0.4, help="fraction of the soak's turns issued")
    add("--down-s", type=float, default=3.0, help="seconds the killed gateway stays down")
    add("--quota-rpm", type=int, default=10, help="the tight users' requests_per_minute")
    add("--db-turns", type=int, default=200, help="turns measured through the counter")
    add("--pool-size", type=int, default=16, help="each gateway's database.pool_size")
    add("--stub-interval-ms", type=float, default=5.0, help="gap between the reply's pieces")
    add("--keep", action="store_true", help="keep the logs (always kept after a failure)")
    # Hidden: this script's own server processes.
    add("--role", choices=("stub", "pgcount"), help=argparse.SUPPRESS)
    add("--ready-file", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


@dataclass
class Figures:
    lost: int | None = None
    duplicated: int | None = None
    interleaved: int | None = None
    missed: int | None = None
    quota_overrun: int | None = None
    turns_per_s: dict[int, float] = field(default_factory=dict)

    def line(self) -> str:
        def n(value: int | None) -> str:
            return "n/a" if value is None else str(value)

        def r(count: int) -> str:
            return fmt(self.turns_per_s.get(count, float("nan")), 1)

        return (
            f"soak_lost={n(self.lost)} soak_duplicated={n(self.duplicated)}"
            f" soak_interleaved={n(self.interleaved)} soak_missed_broadcasts={n(self.missed)}"
            f" quota_overrun={n(self.quota_overrun)} turns_per_s_1={r(1)} turns_per_s_3={r(3)}"
        )


def restart(gateway: Gateway) -> None:
    gateway.restarts += 1
    gateway.start()
    gateway.wait_healthy()


async def set_quotas(gateway: Gateway, admin_key: str, users: tuple[str, ...], rpm: int) -> bool:
    """PATCH each user's requests_per_minute; False when this version has no quotas."""
    import httpx

    async with httpx.AsyncClient(
        base_url=gateway.url, headers={"Authorization": f"Bearer {admin_key}"}, timeout=30
    ) as client:
        for user in users:
            response = await client.patch(
                f"/v1/users/{user}", json={"quotas": {"requests_per_minute": rpm}}
            )
            if response.status_code != 200:
                print(
                    f"  quotas: PATCH /v1/users/{user} answered {response.status_code}"
                    f" ({response.text[:200]}): this version has no per-user quotas",
                    flush=True,
                )
                return False
    return True


async def database_stats(database_url: str) -> dict[str, int]:
    import asyncpg

    conn = await asyncpg.connect(database_url)
    try:
        row = await conn.fetchrow(
            "SELECT xact_commit + xact_rollback AS xacts FROM pg_stat_database"
            " WHERE datname = current_database()"
        )
        tables = await conn.fetchrow(
            "SELECT sum(n_tup_ins) AS ins, sum(n_tup_upd) AS upd, sum(n_tup_del) AS del,"
            " sum(seq_scan) + sum(coalesce(idx_scan, 0)) AS scans FROM pg_stat_user_tables"
        )
    finally:
        await conn.close()
    assert row is not None and tables is not None
    found = {"xacts": int(row["xacts"])}
    found.update({k: int(tables[k] or 0) for k in ("ins", "upd", "del", "scans")})
    return found


async def stats_settled(database_url: str) -> dict[str, int]:
    """pg_stat_* as of now: the statistics collector reports with a delay of up to 0.5 s
    (PostgreSQL 15+: at transaction end, but read through a snapshot)."""
    await asyncio.sleep(1.0)
    return await database_stats(database_url)


def orchestrate(args: argparse.Namespace) -> int:
    if not args.postgres_url:
        print("scale_soak: --postgres-url (or SESSIONGATE_TEST_POSTGRES_URL) is required")
        print(Figures().line())
        return 2
    soak_turns = args.turns or (900 if args.quick else 3000)
    throughput_turns = args.throughput_turns or (300 if args.quick else 900)
    workdir = Path(tempfile.mkdtemp(prefix="sessiongate-soak-"))
    figures = Figures()
    print(
        f"scale_soak: {'quick' if args.quick else 'full'} run; {args.gateways} gateways,"
        f" {soak_turns} soak turns over {args.keys} keys, {args.concurrency} clients;"
        f" machine: {machine_line()}",
        flush=True,
    )
    began = time.perf_counter()
    database_url = create_database(args.postgres_url)
    stub = counter = None
    gateways: list[Gateway] = []
    extra: Gateway | None = None
    succeeded = False
    try:
        stub = start_child(
            "stub",
            ["stub", "--stub-interval-ms", str(args.stub_interval_ms)],
            workdir,
            entry=HERE,
        )
        stub_url = f"http://127.0.0.1:{stub.info['port']}"
        gateways = make_gateways(workdir, database_url, stub_url, args.gateways, args.pool_size)
        first = gateways[0].config
        api_key = add_user(first, "soak")
        admin_key = add_user(first, "operator", "--admin")
        quota_keys = {user: add_user(first, user) for user in QUOTA_USERS}
        for gateway in gateways:
            gateway.start()
        for gateway in gateways:
            gateway.wait_healthy()
        print(f"  gateways: {', '.join(f'{g.name} :{g.port}' for g in gateways)}", flush=True)
        run_async(
            phases(
                args,
                figures,
                gateways,
                database_url,
                api_key,
                admin_key,
                quota_keys,
                soak_turns,
                throughput_turns,
            )
        )
        # Database work per turn, through the counting relay, on a gateway of its own.
        counter = start_child(
            "pgcount", ["pgcount", "--postgres-url", args.postgres_url], workdir, entry=HERE
        )
        counted_url = via_port(database_url, counter.info["port"])
        extra = make_gateways(workdir / "counted", counted_url, stub_url, 1, args.pool_size)[0]
        extra.start()
        extra.wait_healthy()
        run_async(database_work(args, extra, api_key, workdir / "pgcount.ready.json"))
        succeeded = True
    except Exception:
        import traceback

        traceback.print_exc()
    finally:
        for gateway in [*gateways, *([extra] if extra else [])]:
            gateway.stop()
        for child in (stub, counter):
            if child is not None:
                stop_child(child.process)
        drop_database(args.postgres_url, database_url)
        if succeeded and not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            print(f"logs kept in {workdir}", file=sys.stderr)
    print(f"\nscale_soak finished in {time.perf_counter() - began:.0f} s")
    print(figures.line())
    return 0 if succeeded else 1


async def phases(
    args: argparse.Namespace,
    figures: Figures,
    gateways: list[Gateway],
    database_url: str,
    api_key: str,
    admin_key: str,
    quota_keys: dict[str, str],
    soak_turns: int,
    throughput_turns: int,
) -> None:
    async with Clients(gateways, api_key, args.concurrency) as clients:
        # Warm every gateway (connections, prepared statements, the first turn's imports).
        await closed_loop(clients, len(gateways), 3 * args.concurrency, "warm")
        print("\nThroughput (closed loop, each client its own key, non-streaming turns)")
        for active in range(1, len(gateways) + 1):
            cpu_before = [g.cpu_seconds() for g in gateways]
            busy_before, stats_before = machine_busy_seconds(), await database_stats(database_url)
            wall_before = time.perf_counter()
            rate, errors = await closed_loop(clients, active, throughput_turns, f"tp{active}")
            wall = time.perf_counter() - wall_before
            stats = await stats_settled(database_url)
            cpu = sum(g.cpu_seconds() - b for g, b in zip(gateways, cpu_before, strict=True))
            busy = machine_busy_seconds() - busy_before
            figures.turns_per_s[active] = rate
            done = throughput_turns - errors
            print(
                f"  {active} gateway{'s' if active > 1 else ' '}: {rate:7.1f} turns/s"
                f"  ({done} turns, {errors} failed; gateways' CPU {1000 * cpu / max(done, 1):.2f}"
                f" ms/turn; machine {busy / wall:.2f} of {os.cpu_count()} cores busy;"
                f" {(stats['xacts'] - stats_before['xacts']) / max(done, 1):.1f} transactions"
                " per turn)",
                flush=True,
            )

        print(
            f"\nSoak: {soak_turns} turns over {args.keys} keys, {args.watched_keys} keys"
            f" watched by WebSockets; {gateways[-1].name} SIGKILLed at"
            f" {args.kill_at:.0%} of the turns, restarted {args.down_s:g} s later",
            flush=True,
        )
        plan = SoakPlan(soak_turns, args.keys, args.watched_keys, args.kill_at, args.down_s)
        outcome = await soak(clients, gateways, api_key, plan, restart)
    ok = [r for r in outcome.results if r.ok]
    failed = [r for r in outcome.results if not r.ok]
    retried = sum(1 for r in outcome.results if r.attempts > 1)
    print(
        f"  {len(ok)} turns answered, {len(failed)} failed after retries, {retried} needed"
        f" a retry; {len(ok) / outcome.wall_s:.1f} turns/s over {outcome.wall_s:.1f} s"
        f" (the kill at {outcome.kill_seen_s:.1f} s)"
    )
    if failed:
        print(f"  failures: {Counter(r.error for r in failed).most_common(5)}")
    check = await check_histories(database_url, "soak", args.keys, outcome.results)
    figures.lost, figures.duplicated = check.lost, check.duplicated
    figures.interleaved = check.interleaved
    figures.missed = missed_broadcasts(outcome.listeners, check)
    reconnects = sum(li.reconnects for li in outcome.listeners)
    print(
        f"  stored: {check.messages} messages; lost {check.lost}, duplicated"
        f" {check.duplicated}, interleaved {check.interleaved}; listeners missed"
        f" {figures.missed} turns ({reconnects} reconnects after the kill)"
    )
    print(
        f"  of the duplicates, {check.cut} are user messages of turns cut short by the kill"
        " (kept unanswered, as after any crash) whose retry was answered once on another"
        " gateway; each also counts once as interleaved"
    )
    for example in check.examples:
        print(f"    e.g. {example}")

    print(f"\nQuotas: {len(quota_keys)} users at requests_per_minute = {args.quota_rpm}")
    if await set_quotas(gateways[0], admin_key, tuple(quota_keys), args.quota_rpm):
        admitted = await quota_burst(gateways, quota_keys, args.quota_rpm, 3 * args.quota_rpm)
        figures.quota_overrun = quota_overrun(admitted, args.quota_rpm)
        print(
            f"  each sent {3 * args.quota_rpm} at once over {len(gateways)} gateways; admitted:"
            f" {admitted}; overrun {figures.quota_overrun}"
        )


async def database_work(
    args: argparse.Namespace, gateway: Gateway, api_key: str, ready: Path
) -> None:
    async with Clients([gateway], api_key, min(args.concurrency, 8)) as clients:
        await closed_loop(clients, 1, 40, "dbwarm")
        print(f"\nDatabase work per turn ({args.db_turns} turns on one gateway through a counter)")
        runs = (("plain", "plain turn", False), ("idem", "with Idempotency-Key", True))
        for label, title, idempotent in runs:
            await asyncio.sleep(0.5)
            before = read_counts(ready)
            began = time.perf_counter()

            async def run(n: int, tag: str = label, idem: bool = idempotent) -> None:
                key = f"db:{n % clients.concurrency}"
                idempotency_key = f"db-{tag}-{n}" if idem else None
                await clients.turn(0, key, f"db {tag} {n}", idempotency_key)

            for start in range(0, args.db_turns, clients.concurrency):
                stop = min(args.db_turns, start + clients.concurrency)
                await asyncio.gather(*(run(n) for n in range(start, stop)))
            wall = time.perf_counter() - began
            await asyncio.sleep(0.5)
            after = read_counts(ready)
            per: dict[str, Any] = {
                k: (after[k] - before[k]) / args.db_turns for k in ("statements", "round_trips")
            }
            print(
                f"  {title}: {per['statements']:.1f} statements, {per['round_trips']:.1f}"
                f" round trips per turn ({wall:.1f} s; background work of the gateway in"
                " that time included)",
                flush=True,
            )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    roles: dict[str, Callable[[argparse.Namespace], None]] = {
        "stub": serve_soak_stub,
        "pgcount": serve_pg_counter,
    }
    if args.role:
        roles[args.role](args)
        return 0
    try:
        return orchestrate(args)
    except Exception:  # the run could not even start: say why, and still end with the line
        import traceback

        traceback.print_exc()
        sys.stderr.flush()
        print(Figures().line())
        return 1


if __name__ == "__main__":
    sys.exit(main())
