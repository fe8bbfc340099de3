"""`ray`: the Ray cluster this node belongs to: nodes, actors, tasks, resources, stuck work.

The probe never imports `ray`. It finds the cluster's address with the standard
library (the `address` parameter, RAY_ADDRESS, Ray's `ray_current_cluster` file,
or the `--gcs-address` of a raylet running on this node), checks that the GCS port
answers, and then runs the node's own Python (`sys.executable`) on a small program
that connects with `ray.init(address=...)`, reads the cluster through Ray's state
API (`ray.util.state`, served by the dashboard) or, when the dashboard is not
running, straight from the GCS, and prints what it read as JSON lines. That
process runs in its own process group and is killed with it at the timeout; what
it printed before still counts. The summary (stuck actors, stuck collection,
demands) is computed here, from plain data, so it is the same for both sources.

Verified on Ray 2.60: an actor whose `__init__` blocks shows as PENDING_CREATION
(with a worker pid but no node id), its ACTOR_CREATION_TASK is RUNNING, and calls
to its methods wait in PENDING_NODE_ASSIGNMENT. A method that never returns on an
initialised actor is a RUNNING ACTOR_TASK of an ALIVE actor.
"""

from __future__ import annotations

import json
import os
import re
import socket
import sys
import time
from pathlib import Path
from typing import Any

from runbook.checks.base import CheckContext

NAME = "ray"
SUMMARY = {
    "en": "Ray cluster state: nodes, actors and tasks by state, resources, stuck actor init or collection",
    "zh": "Ray 集群状态：节点、按状态统计的 actor 和任务、资源，以及 actor 初始化或结果收集是否卡住",
}
PARAMS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "address": {
            "type": "string",
            "default": "",
            "description": "GCS address host:port (or ray://...); empty or auto: RAY_ADDRESS, then "
                           "Ray's ray_current_cluster file, then a raylet running on this node",
        },
        "pending_after": {
            "type": "number",
            "minimum": 0,
            "default": 60,
            "description": "seconds after which a pending actor or a running task counts as stuck",
        },
        "limit": {
            "type": "integer",
            "minimum": 1,
            "default": 1000,
            "description": "at most this many nodes, actors and tasks are read",
        },
        "python": {
            "type": "string",
            "minLength": 1,
            "description": "interpreter that imports ray (default: the training process's Python, "
                           "else the probe's)",
        },
    },
    "additionalProperties": False,
}
_NODE = "node_id, ip, state, resources"
_ACTORS = ("total, by_state {ALIVE, PENDING_CREATION, DEPENDENCIES_UNREADY, RESTARTING, DEAD: n}, "
           "alive, pending_creation, dead, initializing, waiting_for_resources, "
           "death_causes [{class_name, count, cause}], oldest_pending_s, pending_classes")
_TASKS = ("total, by_state {RUNNING, PENDING_NODE_ASSIGNMENT, FINISHED, FAILED, ...: n}, running, "
          "pending, finished, failed, oldest_running_s, stuck_running, finished_recent")
RESULT_FIELDS = {
    "available": {"type": "boolean",
                  "en": "Ray is importable by this node's Python (and answered, when a cluster runs)",
                  "zh": "本节点的 Python 能导入 ray（有集群时集群也作出了应答）"},
    "running": {"type": "boolean",
                "en": "A Ray cluster was found and connected to (false: none on this node or at "
                      "`address`; null: found but the connection failed)",
                "zh": "找到并连接上了 Ray 集群（false：本节点或 `address` 处没有集群；"
                      "null：找到了但连接失败）"},
    "reason": {"type": "string",
               "en": "Why the state is missing or incomplete (null when everything was read)",
               "zh": "状态缺失或不完整的原因（全部读取成功时为 null）"},
    "address": {"type": "string", "en": "The GCS address inspected (null when none was found)",
                "zh": "检查的 GCS 地址（没有找到时为 null）"},
    "addresses_found": {"type": "array",
                        "en": "GCS addresses found on this node that answer, when `address` was not "
                              "given (more than one: several clusters; the first is inspected)",
                        "zh": "未指定 `address` 时在本节点找到且有应答的 GCS 地址（多于一个说明有多个集群，"
                              "检查的是第一个）"},
    "ray_version": {"type": "string", "en": "Ray version of this node's Python",
                    "zh": "本节点 Python 中的 Ray 版本"},
    "source": {"type": "string",
               "en": "Where actors and tasks came from: state_api (the dashboard) or gcs (read "
                     "directly because the state API did not answer)",
               "zh": "actor 和任务信息的来源：state_api（dashboard）或 gcs"
                     "（state API 无应答时直接读取 GCS）"},
    "state_api_error": {"type": "string",
                        "en": "Why the state API was not used (null when it was)",
                        "zh": "没有使用 state API 的原因（使用了则为 null）"},
    "nodes": {"type": "object", "en": "Ray nodes: {alive, dead}", "zh": "Ray 节点数：{alive, dead}"},
    "node_list": {"type": "array", "en": f"One entry per node: {{{_NODE}}} (resources: totals)",
                  "zh": f"每个节点一项：{{{_NODE}}}（resources 为资源总量）"},
    "actors": {"type": "object",
               "en": f"Actors: {{{_ACTORS}}}; initializing = __init__ running, waiting_for_resources "
                     "= not yet placed on a node; oldest_pending_s = seconds the oldest not-yet-alive "
                     "actor has waited since it was created (null if none or unknown)",
               "zh": f"actor 统计：{{{_ACTORS}}}；initializing 为 __init__ 正在执行，"
                     "waiting_for_resources 为尚未分配到节点；oldest_pending_s 为最早创建、仍未就绪的 "
                     "actor 已等待的秒数（没有或未知时为 null）"},
    "tasks": {"type": "object",
              "en": f"Tasks (actor creation, actor and normal tasks): {{{_TASKS}}}; stuck_running = "
                    "running longer than pending_after, finished_recent = finished within "
                    "pending_after",
              "zh": f"任务统计（actor 创建任务、actor 任务和普通任务）：{{{_TASKS}}}；stuck_running 为"
                    "运行超过 pending_after 的任务数，finished_recent 为最近 pending_after 秒内完成的任务数"},
    "resources": {"type": "object",
                  "en": "Cluster resources {total: {CPU, GPU, memory, ...}, available: {...}}",
                  "zh": "集群资源 {total: {CPU, GPU, memory, ...}, available: {...}}"},
    "demands": {"type": "object",
                "en": "Work waiting for a node: {count, resources (summed requirements), infeasible "
                      "(resource shapes no alive node has)}",
                "zh": "等待分配节点的任务：{count, resources（所需资源之和）, infeasible（没有任何存活节点"
                      "能满足的资源需求）}"},
    "cpu_count": {"type": "integer", "en": "CPU cores of this node (os.cpu_count())",
                  "zh": "本节点的 CPU 核数（os.cpu_count()）"},
    "workers_vs_cores": {"type": "number",
                         "en": "Actors alive or pending per CPU core of this node",
                         "zh": "每个 CPU 核对应的存活或等待中的 actor 数"},
    "actor_init_stuck": {"type": "boolean",
                         "en": "Some actor has not become alive (or its __init__ still runs) for "
                               "longer than pending_after",
                         "zh": "有 actor 超过 pending_after 秒仍未就绪（或其 __init__ 仍在执行）"},
    "collect_stuck": {"type": "boolean",
                      "en": "Tasks on live workers have run longer than pending_after and none "
                            "finished within pending_after (ray.get / ray.wait never returns)",
                      "zh": "存活 worker 上的任务运行超过 pending_after 秒，且最近 pending_after 秒内"
                            "没有任务完成（ray.get / ray.wait 不会返回）"},
    "truncated": {"type": "boolean",
                  "en": "Nodes, actors or tasks were cut at `limit`",
                  "zh": "节点、actor 或任务数量达到 `limit` 被截断"},
}
DEFAULT_TIMEOUT = 30.0

INSTALL_HINT = "pip install 'ray[default]'"
NO_CLUSTER = "no Ray cluster on this node"
MARK = "@@runbook-ray "
PENDING_ACTOR_STATES = ("DEPENDENCIES_UNREADY", "PENDING_CREATION", "RESTARTING")
RUNNING_TASK_STATES = ("RUNNING", "RUNNING_IN_RAY_GET", "RUNNING_IN_RAY_WAIT")
WORK_TASK_TYPES = ("ACTOR_TASK", "NORMAL_TASK")
_GCS_FLAG = re.compile(r"--gcs[-_]address=(\S+)")

# Runs in the node's Python: argv = [address, budget seconds, limit]. Prints MARK + JSON lines.
SNIPPET = r'''
import json, os, sys, time, threading
MARK = "@@runbook-ray "
T0 = time.monotonic()
ADDRESS, BUDGET, LIMIT = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
if sys.path and sys.path[0] in ("", "."):
    del sys.path[0]  # a ./ray directory must not shadow the installed package

def emit(**kw):
    sys.stdout.write(MARK + json.dumps(kw, default=str) + "\n")
    sys.stdout.flush()

def left(cap=15.0):
    return max(1.0, min(cap, BUDGET - (time.monotonic() - T0) - 0.5))

def line(exc):
    text = str(exc).strip().splitlines()
    return (type(exc).__name__ + ": " + (text[-1] if text else ""))[:300]

def one_line(cause):
    if not cause:
        return None
    found = []
    def walk(v):
        if isinstance(v, dict):
            for k in ("error_message", "formatted_exception_string", "msg", "message"):
                if isinstance(v.get(k), str) and v[k].strip():
                    found.append(v[k])
            for x in v.values():
                walk(x)
    walk(cause)
    text = found[0] if found else json.dumps(cause, default=str)
    lines = [l.strip() for l in str(text).splitlines() if l.strip()]
    if not lines:
        return None
    pick = lines[-1] if "Traceback" in lines[0] else lines[0]
    return pick[:300]

def as_dict(x):
    return x if isinstance(x, dict) else vars(x)  # older Ray: dicts; newer: dataclasses

def res(d):
    return {k: v for k, v in (d or {}).items() if not k.startswith("node:")}

def actor_row(a):
    return {"actor_id": a.get("actor_id"), "class_name": a.get("class_name"), "state": a.get("state"),
            "pid": a.get("pid"), "node_id": a.get("node_id"),
            "death_cause": one_line(a.get("death_cause")),
            "required_resources": a.get("required_resources") or {}}

def task_row(t):
    return {"task_id": t.get("task_id"), "attempt": t.get("attempt_number"), "name": t.get("name"),
            "type": t.get("type"), "state": t.get("state"), "actor_id": t.get("actor_id"),
            "creation_ms": t.get("creation_time_ms"), "start_ms": t.get("start_time_ms"),
            "end_ms": t.get("end_time_ms"), "required_resources": t.get("required_resources") or {}}

def cut(rows, done_states):
    rows = [r for r in rows if r.get("type") != "DRIVER_TASK"]
    rows.sort(key=lambda r: (r.get("state") in done_states, -(r.get("creation_ms") or 0)))
    return rows[:LIMIT], len(rows) > LIMIT

if not os.environ.get("RAY_AUTH_MODE"):
    token_file = os.environ.get("RAY_AUTH_TOKEN_PATH") or os.path.expanduser("~/.ray/auth_token")
    if os.environ.get("RAY_AUTH_TOKEN") or os.path.isfile(token_file):
        os.environ["RAY_AUTH_MODE"] = "token"  # what ray.init("auto") does when a token exists
try:
    import ray
except Exception as exc:
    emit(import_error=line(exc))
    sys.exit(0)
emit(ray_version=getattr(ray, "__version__", None))
try:
    ray.init(address=ADDRESS, log_to_driver=False, logging_level="ERROR",
             namespace="_runbook_probe", ignore_reinit_error=True)
except Exception as exc:
    emit(connect_error=line(exc))
    sys.exit(0)
emit(connected=True, now_ms=time.time() * 1000)

nodes = []
all_nodes = ray.nodes()
for n in all_nodes[:LIMIT]:
    nodes.append({"node_id": n.get("NodeID"), "ip": n.get("NodeManagerAddress"),
                  "state": "ALIVE" if n.get("Alive") else "DEAD", "resources": res(n.get("Resources"))})
emit(node_list=nodes, nodes_truncated=len(all_nodes) > LIMIT)
try:
    emit(resources={"total": res(ray.cluster_resources()), "available": res(ray.available_resources())})
except Exception as exc:
    emit(resources_error=line(exc))

actors = tasks = None
source = api_error = None
try:
    from ray.util import state as st
    api = st.list_nodes(address=ADDRESS, limit=LIMIT, timeout=int(left(10)),
                        raise_on_missing_output=False)
    if {as_dict(n).get("node_id") for n in api} != {n["node_id"] for n in nodes}:
        raise RuntimeError("the state API answering belongs to another cluster")
    actors = [actor_row(as_dict(a))
              for a in st.list_actors(address=ADDRESS, limit=LIMIT, detail=True,
                                      timeout=int(left()), raise_on_missing_output=False)]
    tasks = [task_row(as_dict(t))
             for t in st.list_tasks(address=ADDRESS, limit=LIMIT, detail=True,
                                    timeout=int(left()), raise_on_missing_output=False)]
    source = "state_api"
    emit(actors_truncated=len(actors) >= LIMIT, tasks_truncated=len(tasks) >= LIMIT)
except Exception as exc:
    api_error = line(exc)
def gcs_actors(gstate):
    from google.protobuf.json_format import MessageToDict
    rows = []
    for a in gstate.actors().values():
        cause = a.get("DeathCause")
        try:
            cause = MessageToDict(cause, preserving_proto_field_name=True) if cause else None
        except Exception:
            cause = {"message": str(cause)}
        node = (a.get("Address") or {}).get("NodeID") or None
        rows.append(actor_row({"actor_id": a.get("ActorID"), "class_name": a.get("ActorClassName"),
                               "state": a.get("State"), "pid": a.get("Pid") or None,
                               "node_id": None if node and set(node) == {"f"} else node,
                               "death_cause": cause}))
    emit(actors_truncated=len(rows) > LIMIT)
    return rows[:LIMIT]

def gcs_tasks(gstate):
    from ray.util.state.common import protobuf_to_task_state_dict
    g = gstate.state
    if hasattr(g, "_get_all_task_events"):
        events = g._get_all_task_events()
    else:
        from ray.core.generated import gcs_pb2
        events = [gcs_pb2.TaskEvents.FromString(e)
                  for e in g._connect_and_get_accessor().get_task_events()]
    rows, more = cut([task_row(protobuf_to_task_state_dict(e)) for e in events], ("FINISHED", "FAILED"))
    emit(tasks_truncated=more)
    return rows

if source is None:
    source, actors, tasks = "gcs", None, None
    try:
        from ray._private import state as gstate
        actors = gcs_actors(gstate)
    except Exception as exc:
        emit(actors_error=line(exc))
    if actors is not None:
        try:
            tasks = gcs_tasks(gstate)
        except Exception as exc:
            emit(tasks_error=line(exc))
emit(source=source, state_api_error=api_error, actors=actors, tasks=tasks,
     now_ms=time.time() * 1000, done=True)
threading.Timer(2.0, os._exit, (0,)).start()
try:
    ray.shutdown()
finally:
    os._exit(0)
'''




def run(params: dict[str, Any], ctx: CheckContext) -> dict[str, Any]:
    pending_after = float(params.get("pending_after", 60))
    limit = int(params.get("limit", 1000))
    wanted = (params.get("address") or "").strip()
    from runbook.checks._subpython import can_import, default_python

    python = params.get("python") or default_python(needs="ray", ctx=ctx)
    if not can_import(python, "ray", ctx):
        return _result(False, f"ray is not importable by {python} ({INSTALL_HINT})")

    address, why_not, found = find_address(wanted, ctx)
    if address is None:
        return _result(True, why_not, addresses_found=found)

    env = dict(ctx.env)
    env["RAY_ADDRESS"] = address  # Ray's helpers prefer it to their own auto-detection
    env.pop("RAY_API_SERVER_ADDRESS", None)
    env.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    env.setdefault("RAY_gcs_server_port_wait_time_s", "5")  # bound ray.init's GCS retries
    budget = ctx.remaining()
    child = CheckContext(deadline=ctx.deadline, env=env)
    outcome = child.run_command(
        [python, "-c", SNIPPET, address, f"{budget:.1f}", str(limit)], timeout=budget)
    raw = parse_lines(outcome.stdout)
    if outcome.not_found or "import_error" in raw:
        why = raw.get("import_error") or outcome.stderr.strip()
        return _result(False, f"ray is not importable by {python}: {why} ({INSTALL_HINT})",
                       address=address, addresses_found=found)
    result = _result(True, None, address=address, addresses_found=found,
                     timed_out=outcome.timed_out, ray_version=raw.get("ray_version"))
    if not raw.get("connected"):
        result["running"] = None
        if "connect_error" in raw:
            result["reason"] = f"could not connect to Ray at {address}: {raw['connect_error']}"
        elif outcome.timed_out:
            result["reason"] = (f"Ray did not answer within {outcome.duration_s:.1f}s "
                                f"(killed before it connected to {address})")
        else:
            result["reason"] = f"the Ray query failed: {_last_line(outcome.stderr, outcome.returncode)}"
        return result
    result["running"] = True
    result.update(summarize(raw, pending_after, os.cpu_count()))
    missing = [part for part in ("actors", "tasks") if raw.get(part) is None]
    if outcome.timed_out and not raw.get("done"):
        result["reason"] = (f"Ray did not answer within {outcome.duration_s:.1f}s; partial result "
                            f"(not read: {', '.join(missing) or 'the end'})")
    elif raw.get("actors_error") or raw.get("tasks_error"):
        part = "actors" if raw.get("actors_error") else "tasks"
        result["reason"] = f"{part} could not be read: {raw[part + '_error']}"
    elif not raw.get("done"):
        result["reason"] = f"the Ray query stopped early: {_last_line(outcome.stderr, outcome.returncode)}"
    return result


def _result(available: bool, reason: str | None, **fields: Any) -> dict[str, Any]:
    """Every field, so that trees can branch on any of them whatever happened."""
    result: dict[str, Any] = {
        "available": available, "running": False, "reason": reason, "timed_out": False,
        "address": None, "addresses_found": [], "ray_version": None, "source": None,
        "state_api_error": None, "nodes": None, "node_list": [], "actors": None, "tasks": None,
        "resources": None, "demands": None, "cpu_count": os.cpu_count(), "workers_vs_cores": None,
        "actor_init_stuck": None, "collect_stuck": None, "truncated": False,
    }
    result.update(fields)
    return result


def _last_line(stderr: str, returncode: int | None) -> str:
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    return lines[-1][:300] if lines else f"exit {returncode}"


# -- finding the cluster ------------------------------------------------------------------------


def find_address(wanted: str, ctx: CheckContext) -> tuple[str | None, str | None, list[str]]:
    """(address to inspect, why none, GCS addresses found on this node).

    An explicit address is used as given (once its port answers). Otherwise, like
    `ray.init(address="auto")`: RAY_ADDRESS, Ray's ray_current_cluster file, then the
    --gcs-address of raylets running on this node (newest first).
    """
    if wanted and wanted != "auto":
        error = gcs_reachable(wanted, ctx)
        if error:
            return None, f"no Ray cluster at {wanted} ({error})", []
        return wanted, None, []
    candidates = discover(ctx.env)
    if not candidates:
        return None, NO_CLUSTER, []
    reachable: list[str] = []
    errors: list[str] = []
    for address, origin in candidates:
        error = gcs_reachable(address, ctx)
        if error:
            errors.append(f"{origin} names {address}: {error}")
        elif address not in reachable:
            reachable.append(address)
    if not reachable:
        return None, f"{NO_CLUSTER} ({'; '.join(errors)})", []
    return reachable[0], None, reachable


def discover(env: dict[str, str]) -> list[tuple[str, str]]:
    """Candidate GCS addresses with where each came from, in the order Ray itself tries them."""
    found: list[tuple[str, str]] = []
    from_env = env.get("RAY_ADDRESS", "").strip()
    # http(s)://... is a dashboard address for `ray job submit`, not one ray.init connects to
    if from_env and from_env not in ("auto", "local") and not from_env.startswith(("http:", "https:")):
        found.append((from_env, "RAY_ADDRESS"))
    cluster_file = ray_temp_dir(env) / "ray_current_cluster"
    try:
        recorded = cluster_file.read_text().strip().splitlines()
    except OSError:
        recorded = []
    if recorded and recorded[0].strip():
        found.append((recorded[0].strip(), str(cluster_file)))
    found += [(address, "a raylet on this node") for address in raylet_gcs_addresses()]
    return found


def ray_temp_dir(env: dict[str, str]) -> Path:
    """Ray's temp dir: $RAY_TMPDIR/ray, else $TMPDIR/ray (Linux), else /tmp/ray."""
    root = env.get("RAY_TMPDIR") or (env.get("TMPDIR") if sys.platform.startswith("linux") else None)
    return Path(root or "/tmp") / "ray"


def raylet_gcs_addresses(proc: Path = Path("/proc")) -> list[str]:
    """--gcs-address of the raylets running on this node, newest raylet first."""
    raylets: list[tuple[int, str]] = []
    try:
        entries = list(proc.iterdir())
    except OSError:
        return []
    for entry in entries:
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if not argv or not argv[0].endswith(b"raylet"):
            continue
        for arg in argv[1:]:
            match = _GCS_FLAG.match(arg.decode("utf-8", "replace"))
            if match:
                raylets.append((_start_ticks(entry), match.group(1)))
                break
    ordered: list[str] = []
    for _, address in sorted(raylets, reverse=True):
        if address not in ordered:
            ordered.append(address)
    return ordered


def _start_ticks(entry: Path) -> int:
    try:
        raw = (entry / "stat").read_text()
        return int(raw[raw.rfind(")") + 2:].split()[19])
    except (OSError, ValueError, IndexError):
        return 0


def gcs_reachable(address: str, ctx: CheckContext) -> str | None:
    """None when something accepts TCP connections at address (host:port or ray://host:port)."""
    hostport = address.split("://", 1)[-1].rstrip("/")
    host, _, port = hostport.rpartition(":")
    host = host.strip("[]")
    if not host or not port.isdigit():
        return f"not a host:port address: {address!r}"
    try:
        with socket.create_connection((host, int(port)), timeout=min(2.0, ctx.remaining())):
            return None
    except OSError as exc:
        return exc.strerror or type(exc).__name__


# -- reading the answer -------------------------------------------------------------------------


def parse_lines(stdout: str) -> dict[str, Any]:
    """Merge the JSON objects the snippet printed after MARK (Ray's own output is ignored)."""
    raw: dict[str, Any] = {}
    for line in stdout.splitlines():
        if line.startswith(MARK):
            try:
                part = json.loads(line[len(MARK):])
            except ValueError:
                continue  # a line cut by the kill
            if isinstance(part, dict):
                raw.update(part)
    return raw


def summarize(raw: dict[str, Any], pending_after: float, cpu_count: int | None) -> dict[str, Any]:
    """The result fields derived from what the snippet read (any part may be missing)."""
    now_ms = float(raw.get("now_ms") or time.time() * 1000)
    node_list = raw.get("node_list") or []
    actors: list[dict[str, Any]] | None = raw.get("actors")
    tasks: list[dict[str, Any]] | None = raw.get("tasks")
    out: dict[str, Any] = {
        "source": raw.get("source"),
        "state_api_error": raw.get("state_api_error"),
        "nodes": {"alive": sum(n.get("state") == "ALIVE" for n in node_list),
                  "dead": sum(n.get("state") != "ALIVE" for n in node_list)},
        "node_list": node_list,
        "resources": _resources(raw.get("resources")),
        "truncated": any(bool(raw.get(k)) for k in ("nodes_truncated", "actors_truncated",
                                                     "tasks_truncated")),
    }
    creation = _creation_tasks(tasks or [])
    actor_state = {a.get("actor_id"): a.get("state") for a in actors or []}
    if actors is not None:
        out["actors"], out["actor_init_stuck"] = summarize_actors(
            actors, creation, now_ms, pending_after, tasks is not None)
        live = out["actors"]["alive"] + len(out["actors"]["_pending"])
        del out["actors"]["_pending"]
        out["workers_vs_cores"] = round(live / cpu_count, 2) if cpu_count else None
    if tasks is not None:
        out["tasks"], out["collect_stuck"] = summarize_tasks(tasks, actor_state, now_ms, pending_after)
        out["demands"] = summarize_demands(tasks, node_list)
    return out


def _resources(read: Any) -> dict[str, Any] | None:
    """{total, available}; a resource fully in use is missing from Ray's available map: 0 here."""
    if not isinstance(read, dict):
        return None
    total = dict(read.get("total") or {})
    available = {key: 0.0 for key in total}
    available.update(read.get("available") or {})
    return {"total": total, "available": available}


def _creation_tasks(tasks: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """actor_id -> its latest ACTOR_CREATION_TASK attempt."""
    latest: dict[str, dict[str, Any]] = {}
    for task in tasks:
        if task.get("type") != "ACTOR_CREATION_TASK" or not task.get("actor_id"):
            continue
        known = latest.get(task["actor_id"])
        if known is None or (task.get("attempt") or 0) >= (known.get("attempt") or 0):
            latest[task["actor_id"]] = task
    return latest


def _age_s(now_ms: float, since_ms: Any) -> float | None:
    if not isinstance(since_ms, (int, float)) or since_ms <= 0:
        return None
    return max(0.0, (now_ms - since_ms) / 1000.0)


def summarize_actors(
    actors: list[dict[str, Any]], creation: dict[str, dict[str, Any]], now_ms: float,
    pending_after: float, tasks_known: bool,
) -> tuple[dict[str, Any], bool | None]:
    by_state: dict[str, int] = {}
    pending: list[dict[str, Any]] = []
    ages: list[float] = []
    initializing = waiting = 0
    stuck = False
    deaths: dict[tuple[str, str], int] = {}
    for actor in actors:
        state = str(actor.get("state") or "UNKNOWN")
        by_state[state] = by_state.get(state, 0) + 1
        task = creation.get(actor.get("actor_id") or "")
        init_running = task is not None and task.get("state") in RUNNING_TASK_STATES
        if state in PENDING_ACTOR_STATES:
            pending.append(actor)
            age = _age_s(now_ms, task.get("creation_ms") if task else None)
            if age is not None:
                ages.append(age)
                stuck = stuck or age > pending_after
            if init_running:
                initializing += 1
            elif task is not None and task.get("state") not in ("FINISHED", "FAILED"):
                waiting += 1
        elif state == "ALIVE" and init_running and task is not None:
            initializing += 1
            age = _age_s(now_ms, task.get("start_ms") or task.get("creation_ms"))
            stuck = stuck or (age is not None and age > pending_after)
        elif state == "DEAD":
            key = (str(actor.get("class_name") or "?"), str(actor.get("death_cause") or "unknown"))
            deaths[key] = deaths.get(key, 0) + 1
    causes = [{"class_name": cls, "count": n, "cause": cause}
              for (cls, cause), n in sorted(deaths.items(), key=lambda kv: (-kv[1], kv[0]))][:10]
    summary = {
        "total": len(actors),
        "by_state": by_state,
        "alive": by_state.get("ALIVE", 0),
        "pending_creation": by_state.get("PENDING_CREATION", 0),
        "dead": by_state.get("DEAD", 0),
        "initializing": initializing,
        "waiting_for_resources": waiting,
        "death_causes": causes,
        "oldest_pending_s": round(max(ages), 1) if ages else None,
        "pending_classes": sorted({str(a.get("class_name") or "?") for a in pending}),
        "_pending": pending,
    }
    if not tasks_known and pending and not stuck:
        return summary, None  # pending actors whose age cannot be read
    return summary, stuck


def summarize_tasks(
    tasks: list[dict[str, Any]], actor_state: dict[Any, Any], now_ms: float, pending_after: float,
) -> tuple[dict[str, Any], bool]:
    by_state: dict[str, int] = {}
    running_ages: list[float] = []
    stuck_running = finished_recent = 0
    for task in tasks:
        state = str(task.get("state") or "NIL")
        by_state[state] = by_state.get(state, 0) + 1
        work = task.get("type") in WORK_TASK_TYPES
        if state in RUNNING_TASK_STATES:
            age = _age_s(now_ms, task.get("start_ms") or task.get("creation_ms"))
            if age is not None:
                running_ages.append(age)
            on_live_worker = task.get("type") != "ACTOR_TASK" or \
                actor_state.get(task.get("actor_id"), "ALIVE") == "ALIVE"
            if work and on_live_worker and age is not None and age > pending_after:
                stuck_running += 1
        elif state == "FINISHED" and work:
            age = _age_s(now_ms, task.get("end_ms"))
            if age is not None and age <= pending_after:
                finished_recent += 1
    summary = {
        "total": len(tasks),
        "by_state": by_state,
        "running": sum(by_state.get(s, 0) for s in RUNNING_TASK_STATES),
        "pending": sum(n for s, n in by_state.items()
                       if s.startswith("PENDING") or s in ("SUBMITTED_TO_WORKER", "NIL")),
        "finished": by_state.get("FINISHED", 0),
        "failed": by_state.get("FAILED", 0),
        "oldest_running_s": round(max(running_ages), 1) if running_ages else None,
        "stuck_running": stuck_running,
        "finished_recent": finished_recent,
    }
    return summary, stuck_running > 0 and finished_recent == 0


def summarize_demands(tasks: list[dict[str, Any]], node_list: list[dict[str, Any]]) -> dict[str, Any]:
    """Tasks and actor creations waiting for a node: how many, what they ask, what cannot fit."""
    totals: dict[str, float] = {}
    count = 0
    shapes: list[dict[str, float]] = []
    for task in tasks:
        if task.get("state") != "PENDING_NODE_ASSIGNMENT" or task.get("type") == "ACTOR_TASK":
            continue  # an actor's method waits for its actor, not for a node
        count += 1
        shape = {k: float(v) for k, v in (task.get("required_resources") or {}).items()
                 if isinstance(v, (int, float)) and v > 0}
        for key, value in shape.items():
            totals[key] = round(totals.get(key, 0.0) + value, 4)
        if shape not in shapes:
            shapes.append(shape)
    alive = [n.get("resources") or {} for n in node_list if n.get("state") == "ALIVE"]
    infeasible = [shape for shape in shapes
                  if not any(all(node.get(k, 0) >= v for k, v in shape.items()) for node in alive)]
    return {"count": count, "resources": totals, "infeasible": infeasible}
