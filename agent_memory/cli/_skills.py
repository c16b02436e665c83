"""``agent-memory skills``: inspect and manage a user's learned skills (procedural memory).

Examples::

    agent-memory skills list --user alice                      # every agent's skills, with run counts
    agent-memory skills list --user alice --status pending_approval --json
    agent-memory skills show count_words --user alice --code   # details, history, and the code
    agent-memory skills approve count_words --user alice       # pending_approval -> active
    agent-memory skills reject count_words --user alice
    agent-memory skills disable count_words --user alice --agent coder
    agent-memory skills export ./skills --user alice           # SKILL.md folders (Agent Skills format)
    agent-memory skills import ./skills --user bob --agent coder
    agent-memory skills prune --user alice --unused-days 90 --dry-run
    agent-memory skills delete count_words --user alice

``--agent`` picks the agent when a skill name exists for several agents of the user (the command says so).
Exit codes: 0 ok, 1 no such skill (for this user), 2 bad input.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

from ..skills import STATUSES, ProceduralMemory, Skill, SkillRegistry, SkillStatus
from ._main import EXIT_OK, Cli, UsageError


def skill_line(s: Skill) -> str:
    rate = f"{s.success_rate:.0%}" if s.success_rate is not None else "-"
    used = s.last_used_at.strftime("%Y-%m-%d %H:%M") if s.last_used_at else "never"
    return (
        f"{s.agent_id:<12} {s.name:<28} v{s.version:<3} {s.status:<16} {s.execution_count:>5} runs  "
        f"{rate:>4} ok  last used {used}  {s.description[:60]}"
    )


def skill_json(s: Skill, *, code: bool = True) -> dict[str, Any]:
    data = s.model_dump(mode="json", exclude={"relevance", "score"} | (set() if code else {"code"}))
    data["success_rate"] = s.success_rate
    return data


def _registry(store: Any) -> SkillRegistry:
    return SkillRegistry(store)


async def cmd_list(args: argparse.Namespace, cli: Cli) -> int:
    skills = await _registry(await cli.store()).list(cli.user(), args.agent, status=args.status)
    cli.emit([skill_json(s, code=False) for s in skills], "\n".join(skill_line(s) for s in skills) or "no skills")
    return EXIT_OK


async def cmd_show(args: argparse.Namespace, cli: Cli) -> int:
    registry = _registry(await cli.store())
    user = cli.user()
    agent = await registry.resolve_agent(user, args.name, args.agent)
    skill = await registry.get(user, agent, args.name)
    history = await registry.versions(user, agent, args.name)
    if args.version is not None:
        chosen = [v for v in history if v.version == args.version]
        if not chosen:
            raise UsageError(f"skill {args.name!r} has versions {[v.version for v in history]}, not {args.version}")
        version = chosen[0]
        cli.emit(version.model_dump(mode="json"), version.code if args.code else version.model_dump_json(indent=2))
        return EXIT_OK
    data = {**skill_json(skill), "history": [v.model_dump(mode="json", exclude={"code"}) for v in history]}
    lines = [
        skill_line(skill),
        f"description: {skill.description}",
        f"language:    {skill.language}   entrypoint: {skill.entrypoint or '(script)'}   source: {skill.source}",
        f"parameters:  {skill.parameters}",
        f"examples:    {skill.example_prompts}",
        f"tags:        {skill.tags}",
        f"last error:  {skill.last_error or '-'}",
        "versions:    " + ", ".join(f"v{v.version} ({v.success_count}/{v.execution_count} ok)" for v in history),
    ]
    if args.code:
        lines += ["", skill.code]
    cli.emit(data, "\n".join(lines))
    return EXIT_OK


def _status_command(status: SkillStatus, verb: str) -> Any:
    async def handler(args: argparse.Namespace, cli: Cli) -> int:
        registry = _registry(await cli.store())
        user = cli.user()
        agent = await registry.resolve_agent(user, args.name, args.agent)
        skill = await registry.set_status(user, agent, args.name, status)
        cli.emit(skill_json(skill, code=False), f"{verb} {skill.name} (agent {skill.agent_id}): now {skill.status}")
        return EXIT_OK

    return handler


def _safe_dir(agent: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", agent).strip("._") or "agent"


async def cmd_delete(args: argparse.Namespace, cli: Cli) -> int:
    registry = _registry(await cli.store())
    user = cli.user()
    agent = await registry.resolve_agent(user, args.name, args.agent)
    await registry.delete(user, agent, args.name)
    cli.emit({"deleted": args.name, "agent_id": agent}, f"deleted {args.name} (agent {agent}) and its history")
    return EXIT_OK


async def cmd_export(args: argparse.Namespace, cli: Cli) -> int:
    store = await cli.store()
    user = cli.user()
    skills = await _registry(store).list(user, args.agent)
    if args.names:
        wanted = set(args.names)
        missing = wanted - {s.name for s in skills}
        if missing:
            raise UsageError(f"no such skills for this user: {', '.join(sorted(missing))}")
        skills = [s for s in skills if s.name in wanted]
    agents = sorted({s.agent_id for s in skills})
    target = Path(args.directory)
    written: list[str] = []
    for agent in agents:
        # One agent: DIR/<skill>/SKILL.md; several: DIR/<agent>/<skill>/SKILL.md.
        directory = target if len(agents) == 1 else target / _safe_dir(agent)
        memory = ProceduralMemory(store, user_id=user, agent_id=agent)
        names = [s.name for s in skills if s.agent_id == agent]
        written += [str(p) for p in await memory.export_skills(directory, names)]
    cli.emit({"exported": written}, "\n".join(written) or "no skills to export")
    return EXIT_OK


async def cmd_import(args: argparse.Namespace, cli: Cli) -> int:
    memory = ProceduralMemory(await cli.store(), user_id=cli.user(), agent_id=args.agent)
    results = await memory.import_skills(Path(args.path))
    data = [{"name": r.skill.name, "action": r.action, "version": r.skill.version, "status": r.skill.status}
            for r in results]  # fmt: skip
    cli.emit(data, "\n".join(f"{d['action']:<12} {d['name']} v{d['version']} ({d['status']})" for d in data)
             or "no SKILL.md folders found")  # fmt: skip
    return EXIT_OK


async def cmd_prune(args: argparse.Namespace, cli: Cli) -> int:
    doomed = await _registry(await cli.store()).prune(
        cli.user(), args.agent, unused_days=args.unused_days, min_success_rate=args.min_success_rate,
        min_executions=args.min_executions, dry_run=args.dry_run,
    )  # fmt: skip
    verb = "would delete" if args.dry_run else "deleted"
    cli.emit({"dry_run": args.dry_run, "skills": [skill_json(s, code=False) for s in doomed]},
             "\n".join(f"{verb} {skill_line(s)}" for s in doomed) or "nothing to prune")  # fmt: skip
    return EXIT_OK


async def cmd_stats(args: argparse.Namespace, cli: Cli) -> int:
    stats = await _registry(await cli.store()).stats(cli.user(), args.agent)
    rate = f"{stats.success_rate:.0%}" if stats.success_rate is not None else "-"
    text = (
        f"skills: {stats.total} "
        + " ".join(f"{k}={v}" for k, v in sorted(stats.by_status.items()))
        + f"\nruns:   {stats.executions} ({stats.successes} ok, {rate})"
    )
    cli.emit(stats.model_dump(mode="json"), text)
    return EXIT_OK


def _common(p: argparse.ArgumentParser, *, agent_help: str = "only this agent's skills") -> None:
    p.add_argument("--user", "-u", help="user identifier (default: $AGENT_MEMORY_USER)")
    p.add_argument("--agent", "-a", help=agent_help)
    p.add_argument("--json", action="store_true", help="machine-readable JSON output")


def register(subparsers: Any) -> None:
    """Add ``skills`` to the ``agent-memory`` command."""
    skills = subparsers.add_parser("skills", help="learned skills (procedural memory): list, show, approve, export...")
    sub = skills.add_subparsers(dest="skills_command", metavar="SKILLS_COMMAND")
    sub.required = True
    which = "the skill's agent (needed when several agents have a skill of this name)"

    p = sub.add_parser("list", help="the user's skills with status and run counts")
    p.add_argument("--status", choices=STATUSES, help="only skills in this status")
    _common(p)
    p.set_defaults(handler=cmd_list)

    p = sub.add_parser("show", help="one skill: details, version history, code")
    p.add_argument("name")
    p.add_argument("--code", action="store_true", help="print the code too")
    p.add_argument("--version", type=int, help="show this version from the history")
    _common(p, agent_help=which)
    p.set_defaults(handler=cmd_show)

    for command, status, verb, text in (
        ("approve", "active", "approved", "make a pending (or disabled/rejected) skill active"),
        ("reject", "rejected", "rejected", "reject a skill: it is never found or run"),
        ("disable", "disabled", "disabled", "disable a skill without deleting it"),
    ):
        p = sub.add_parser(command, help=text)
        p.add_argument("name")
        _common(p, agent_help=which)
        p.set_defaults(handler=_status_command(status, verb))  # type: ignore[arg-type]

    p = sub.add_parser("delete", help="delete a skill and its version history")
    p.add_argument("name")
    _common(p, agent_help=which)
    p.set_defaults(handler=cmd_delete)

    p = sub.add_parser("export", help="write skills as Agent Skills folders (SKILL.md + scripts/)")
    p.add_argument("directory")
    p.add_argument("names", nargs="*", help="only these skills")
    _common(p)
    p.set_defaults(handler=cmd_export)

    p = sub.add_parser("import", help="register the SKILL.md folders under PATH for --agent")
    p.add_argument("path", help="a skill folder or a folder of skill folders")
    p.add_argument("--user", "-u", help="user identifier (default: $AGENT_MEMORY_USER)")
    p.add_argument("--agent", "-a", required=True, help="agent the skills are for")
    p.add_argument("--json", action="store_true", help="machine-readable JSON output")
    p.set_defaults(handler=cmd_import)

    p = sub.add_parser("prune", help="delete skills unused for a while (and, optionally, unreliable ones)")
    p.add_argument("--unused-days", type=float, default=90, help="not used for this many days (default 90)")
    p.add_argument("--min-success-rate", type=float, help="also delete skills below this success rate")
    p.add_argument("--min-executions", type=int, default=3, help="runs needed before the success rate counts")
    p.add_argument("--dry-run", action="store_true", help="only say what would be deleted")
    _common(p)
    p.set_defaults(handler=cmd_prune)

    p = sub.add_parser("stats", help="skill counts by status and run totals")
    _common(p)
    p.set_defaults(handler=cmd_stats)
