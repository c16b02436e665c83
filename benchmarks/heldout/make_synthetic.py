"""A synthetic held-out set for memory search: four users' agent memories and questions with one gold memory each.

Written once, frozen (``benchmarks/heldout/synthetic.json.gz``, checksum in MANIFEST.sha256) and written without
reading the ranking code or the development datasets. Pure Python, fixed seeds, no network: the same file every run.

Per user (``synth-ana``, ``synth-ben``, ``synth-chen``, ``synth-dia``; disjoint projects, hosts, people), about 400
memories in storage order: command outputs (~50%: test runs, installs, image builds, pod lists, SQL results, logs,
compiler errors, CI logs; 20 to 2,000 lines, some long ones with the error in their last lines), preferences and
facts (~12% each; description ``subject: value``; some facts are re-stored 1-3 times with a new value, later in
the order) and notes (~26%: meetings, decisions, TODOs, runbooks, postmortems). Some outputs get 1-2 near-duplicates
(same kind, same or another project, another day). Questions, each with the one gold memory (or none):

* ``exact``: names an identifier that occurs in the gold and in no other memory of the user;
* ``paraphrase``: asks for the gold in other words (only when no other memory would be asked for the same way);
* ``preference``: a task request that the user's current preference on it should inform, without naming it;
* ``updated_fact``: asks about a subject that was re-stored; the gold is the newest version;
* ``buried_error``: asks about the error near the end of a long output;
* ``unanswerable``: nothing of this user answers it (some use words that only other users' memories contain).

    python benchmarks/heldout/make_synthetic.py     # rewrites synthetic.json.gz; the manifest test then fails
"""

from __future__ import annotations

import gzip
import io
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _synthetic_logs import KINDS
from _synthetic_outputs import Out
from _synthetic_texts import FACTS, FOREIGN, NOTE_KINDS, PREFS, TOPICS, UNANSWERABLE
from _synthetic_vocab import USERS, WEEKDAYS, Profile, hexid, make_profile, other_users_words

HERE = Path(__file__).resolve().parent
OUT = HERE / "synthetic.json.gz"
N_MEMORIES = 400
N_OUTPUTS = 200  # half the memories; preferences (~11%) and facts (~12%) come from the pools, notes fill the rest
QUOTA = {"exact": 22, "paraphrase": 20, "preference": 12, "updated_fact": 10, "buried_error": 12, "unanswerable": 25}


def fact_value(u: Profile, kind: str) -> str:
    r = u.rng
    if kind.startswith("host:"):
        _, env, role = kind.split(":")
        return u.host(env, role) if r.random() < 0.6 else f"{role}-{env}-{hexid(r, 3)}.{u.domain}"
    table = {
        "city": lambda: r.choice(u.cities),
        "person": lambda: r.choice(u.people),
        "apiver": lambda: f"v{r.randint(2, 9)}",
        "url": lambda: f"https://staging-{r.randint(1, 9)}.{u.domain}",
        "key": lambda: "".join(r.sample("ABCDEFGHKLMNPRSTW", 3)),
        "channel": lambda: f"#inc-{r.choice(['war-room', 'live', 'bridge', 'sev'])}-{r.randint(1, 99)}",
        "digits": lambda: str(r.randint(10**11, 10**12 - 1)),
        "k8s": lambda: f"1.{r.randint(25, 31)}.{r.randint(0, 9)}",
        "pg": lambda: f"{r.randint(13, 17)}.{r.randint(1, 9)}",
        "sprint": lambda: r.choice(["one week", "two weeks", "three weeks", "four weeks", "ten days"]),
        "weekday": lambda: r.choice(WEEKDAYS),
        "branch": lambda: r.choice(["main", "trunk", "develop", "master"]),
        "registry": lambda: f"harbor.{u.domain}:{r.choice([443, 5000, 8443])}",
        "slug": lambda: f"{u.projects[0].name}-{r.randint(1, 99)}",
        "bucket": lambda: f"{u.domain.split('.')[0]}-pgdump-{r.randint(100, 999)}",
        "laptop": lambda: r.choice(["ThinkPad X1 Carbon Gen 11", "MacBook Pro 14 M3", "Framework 13", "Dell XPS 15"]),
        "desk": lambda: f"floor {r.randint(1, 6)}, desk {r.randint(1, 60)}",
        "count": lambda: f"{r.randint(40, 9000):,}",
        "money": lambda: f"${r.randint(2, 90) * 500:,}",
        "port": lambda: str(r.randint(2200, 65000)),
        "date": lambda: f"2025-{r.randint(2, 11):02d}-{r.randint(1, 28):02d}",
        "rate": lambda: f"{r.randint(1, 40) * 60} req/min",
        "slo": lambda: r.choice(["99.9%", "99.95%", "99.5%", "99.99%"]),
        "company": lambda: r.choice(
            ["Northwind Foods", "Acme Logistics", "Globex Retail", "Initech Health", "Umbrella Bank"]
        ),
        "days": lambda: f"{r.choice([30, 90, 180, 365, 730])} days",
    }
    return str(table[kind]())


def noisy(u: Profile, text: str) -> str:
    """Occasional shorthand and lower case, as people type."""
    r = u.rng
    for long_word, short in [("production", "prod"), ("configuration", "config"), ("because", "bc"), ("with", "w/")]:
        if r.random() < 0.25:
            text = text.replace(long_word, short)
    return text.lower() if r.random() < 0.15 else text


def preference(u: Profile, subject: str, value: str, update: bool) -> tuple[str, str]:
    r, who = u.rng, u.person
    desc = f"{subject}: {value}" if r.random() < 0.8 else f"{subject.capitalize()}: {value}"
    body = r.choice(
        [
            f"{who} wants {value}.",
            f"Always {value} — {who} asked for this explicitly.",
            f"Preference of {who}: {value}.",
            f"{who} prefers {value}; do not ask again.",
        ]
    )
    if update:
        body += r.choice([" This replaces what was said earlier.", " Changed their mind after the last retro."])
    else:
        body += r.choice(
            ["", " Reason: it keeps reviews predictable.", f" Mentioned while working on {u.proj().name}."]
        )
    return desc, noisy(u, body)


def fact(u: Profile, subject: str, value: str, update: bool) -> tuple[str, str]:
    r = u.rng
    body = r.choice(
        [
            f"The {subject} is {value}.",
            f"{u.person} told me: {subject} = {value}.",
            f"Noting for later: {subject} is {value} (as of {u.stamp('%B %d')}).",
        ]
    )
    if update:
        body += r.choice(
            [" Updated — the previous value is no longer valid.", " Changed this week.", " New since the move."]
        )
    return f"{subject}: {value}", noisy(u, body)


def note(u: Profile, kind: str, topic: tuple[str, str]) -> tuple[str, str, str, str]:
    """(description, content, exact token, paraphrase question)."""
    r, p = u.rng, u.proj()
    said, asked = topic
    a, b = r.sample(u.people, 2)
    ticket = f"{p.name[:3].upper()}-{r.randint(100, 9999)}"
    date = u.stamp("%Y-%m-%d")
    if kind == "meeting":
        desc = r.choice([f"meeting notes {date}: {said}", f"sync with {a.split()[0]} about {said}", f"notes - {said}"])
        body = [
            f"Attendees: {a}, {b}, {u.person}",
            f"Topic: {said} ({p.name})",
            f"- {a.split()[0]} thinks it takes {r.randint(2, 9)} weeks",
            f"- blocker: {ticket} needs review first",
            f"- next check-in {r.choice(WEEKDAYS)}",
        ]
        question = f"what came out of our discussion about {asked} for the {p.gloss}?"
    elif kind == "decision":
        num = f"ADR-{r.randint(10, 400):04d}"
        desc, ticket = f"{num}: {said}", num
        body = [
            f"Context: {p.name} {r.choice(['keeps hitting limits', 'is too costly', 'is hard to operate'])}.",
            f"Decision: go ahead with {said}.",
            f"Consequences: {b} owns the rollout; revisit in Q{r.randint(1, 4)}.",
        ]
        question = f"what did we settle on regarding {asked} for the {p.gloss}?"
    elif kind == "todo":
        desc = r.choice([f"todo for {p.name}", f"TODO list ({p.name}, {date})", f"things to do: {p.name}"])
        body = [
            f"[ ] {said} ({ticket})",
            f"[x] answer {a.split()[0]} about the {r.choice(['budget', 'timeline'])}",
            f"[ ] ping {b.split()[0]} re staging access",
            "[ ] update the README",
        ]
        r.shuffle(body)
        question = f"is {asked} still on my list for the {p.gloss}?"
    elif kind == "runbook":
        desc = f"runbook: {said} ({p.name})"
        body = [
            f"1. announce in #ops, ref {ticket}",
            f"2. ssh {u.host('prod')}",
            f"3. run `make {said.split()[0].lower()}`",
            f"4. verify with `curl -fsS https://{p.name}.{u.domain}/healthz`",
            "5. close the ticket",
        ]
        question = f"what are the steps for {asked} on the {p.gloss}?"
    elif kind == "postmortem":
        ticket = f"INC-{r.randint(1000, 9999)}"
        desc = f"postmortem {ticket}: {said} ({p.name})"
        body = [
            f"Impact: {r.randint(3, 240)} minutes degraded for {p.gloss} users.",
            f"Root cause: {said} went wrong.",
            f"Follow-ups: {a.split()[0]} adds alerting, {b.split()[0]} writes a test.",
        ]
        question = f"what was the outage write-up about {asked} in the {p.gloss}?"
    else:
        desc = r.choice([f"idea: {said}", f"thinking about {said}", f"brainstorm {date}"])
        body = [
            f"What if we tried {said} for {p.name}?",
            f"Could save ~{r.randint(5, 60)}% of the effort.",
            f"Ask {a.split()[0]} — see {ticket}.",
        ]
        question = f"what was my thought about {asked} for the {p.gloss}?"
    return desc, noisy(u, "\n".join(body)), ticket, question


def build_user(user: str) -> dict[str, Any]:
    u = make_profile(user)
    r = u.rng
    prefs = r.sample(PREFS, len(PREFS))[:34]
    facts = r.sample(FACTS, len(FACTS))[:30]
    fact_updates = {s[0]: r.randint(1, 3) for s in r.sample(facts, 10)}
    pref_updates = {s[0]: 1 for s in r.sample(prefs, 10)}
    n_pref = len(prefs) + sum(pref_updates.values())
    n_fact = len(facts) + sum(fact_updates.values())
    n_out = N_OUTPUTS
    n_note = N_MEMORIES - n_out - n_pref - n_fact
    # slots in storage order: (order key, kind, payload); updates come after their first version
    slots: list[tuple[float, str, Any]] = []
    base = ["out"] * n_out + ["note"] * n_note + [("pref", s) for s in prefs] + [("fact", s) for s in facts]
    r.shuffle(base)
    for i, slot in enumerate(base):
        kind, item = (slot, None) if isinstance(slot, str) else slot
        slots.append((float(i), kind, item))
        if kind in ("pref", "fact"):
            for _ in range((pref_updates if kind == "pref" else fact_updates).get(item[0], 0)):
                slots.append((r.uniform(i + 1, len(base)), f"{kind}-update", item))
    slots.sort(key=lambda s: s[0])

    memories: list[dict[str, Any]] = []
    info: dict[str, dict[str, Any]] = {}  # id -> what the questions need
    current: dict[str, str] = {}  # subject -> id of the newest version
    values: dict[str, set[str]] = {}
    pending_dups: list[tuple[Any, Any]] = []
    for _, kind, item in slots:
        u.tick()
        mid = f"{user}-{len(memories):04d}"
        if kind == "out" and pending_dups and r.random() < 0.5:
            gen, pin = pending_dups.pop(0)
            u.pin = pin
            o: Out = gen(u, False)
            u.pin = None
            memories.append(
                {"id": mid, "memory_type": "command_output", "description": o.description, "content": o.content}
            )
            info[mid] = {"out": o, "dup": True}
            continue
        if kind == "out":
            gen, _, can_long = r.choices(KINDS, weights=[k[1] for k in KINDS])[0]
            long = can_long and r.random() < 0.2
            o = gen(u, long)
            memories.append(
                {"id": mid, "memory_type": "command_output", "description": o.description, "content": o.content}
            )
            info[mid] = {"out": o}
            if r.random() < 0.25:
                pin = next((p for p in u.projects if p.name in o.description), None) if r.random() < 0.6 else None
                pending_dups += [(gen, pin)] * r.randint(1, 2)
                info[mid]["has_dup"] = True
        elif kind == "note":
            nk, topic = r.choice(NOTE_KINDS), r.choice(TOPICS)
            desc, content, token, question = note(u, nk, topic)
            memories.append({"id": mid, "memory_type": "note", "description": desc, "content": content})
            info[mid] = {"note": (token, question)}
        else:
            subject = item[0]
            update = kind.endswith("update")
            if kind.startswith("pref"):
                value = r.choice([v for v in item[1] if v not in values.get(subject, set())] or item[1])
                desc, content = preference(u, subject, value, update)
                mtype = "user_preference"
            else:
                value = fact_value(u, item[1])
                for _ in range(50):  # a new value; a few subjects have only a handful (sprint length)
                    if value not in values.get(subject, set()):
                        break
                    value = fact_value(u, item[1])
                desc, content = fact(u, subject, value, update)
                mtype = "user_fact"
            values.setdefault(subject, set()).add(value)
            memories.append({"id": mid, "memory_type": mtype, "description": desc, "content": content})
            info[mid] = {"subject": subject, "item": item, "updated": update}
            current[subject] = mid
    queries = make_queries(u, memories, info, current, set(fact_updates))
    return {"memories": memories, "queries": queries}


def make_queries(
    u: Profile,
    memories: list[dict[str, Any]],
    info: dict[str, dict[str, Any]],
    current: dict[str, str],
    updated: set[str],
) -> list[dict[str, Any]]:
    r = u.rng
    texts = {m["id"]: f"{m['description']}\n{m['content']}".lower() for m in memories}

    def unique_token(mid: str, token: str) -> bool:
        t = token.lower()
        return bool(t) and t in texts[mid] and not any(t in text for k, text in texts.items() if k != mid)

    def once(pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
        seen: dict[str, int] = {}
        for _, q in pairs:
            seen[q] = seen.get(q, 0) + 1
        return [(m, q) for m, q in pairs if seen[q] == 1]

    out_ids = [m for m in info if "out" in info[m]]
    note_ids = [m for m in info if "note" in info[m]]
    live_facts = [m for m in current.values() if memories[int(m.rsplit("-", 1)[1])]["memory_type"] == "user_fact"]
    plain_facts = [m for m in live_facts if info[m]["subject"] not in updated]
    exact: list[tuple[str, str]] = []
    for m in out_ids:
        o = info[m]["out"]
        if unique_token(m, o.token):
            exact.append((m, o.exact))
    # near-duplicated outputs first, so that ranking among look-alikes is measured
    exact.sort(key=lambda e: not info[e[0]].get("has_dup") and not info[e[0]].get("dup"))
    chosen: list[tuple[str, str, str]] = [(m, q, "exact") for m, q in exact[:8]]
    rest = exact[8:]
    r.shuffle(rest)
    chosen += [(m, q, "exact") for m, q in rest[:10]]
    notes_exact = [
        (m, r.choice([f"{info[m]['note'][0]}", f"notes on {info[m]['note'][0]}", f"what was {info[m]['note'][0]}"]))
        for m in note_ids
        if unique_token(m, info[m]["note"][0])
    ]
    chosen += [(m, q, "exact") for m, q in r.sample(notes_exact, 2)]
    for m in r.sample(plain_facts, 2):
        chosen.append((m, next(f for f in FACTS if f[0] == info[m]["subject"])[3].format(p=u.person), "exact"))

    used = {c[0] for c in chosen}
    para_out = once([(m, info[m]["out"].para) for m in out_ids])
    para_note = once([(m, info[m]["note"][1]) for m in note_ids])
    r.shuffle(para_out)
    r.shuffle(para_note)
    chosen += [(m, q, "paraphrase") for m, q in [p for p in para_out if p[0] not in used][:10]]
    chosen += [(m, q, "paraphrase") for m, q in [p for p in para_note if p[0] not in used][:6]]
    for m in r.sample([f for f in plain_facts if f not in used], 4):
        chosen.append((m, next(f for f in FACTS if f[0] == info[m]["subject"])[2].format(p=u.person), "paraphrase"))

    prefs_now = [
        m for s, m in current.items() if memories[int(m.rsplit("-", 1)[1])]["memory_type"] == "user_preference"
    ]
    for m in r.sample(prefs_now, QUOTA["preference"]):
        chosen.append((m, r.choice(info[m]["item"][2]), "preference"))
    for subject in sorted(updated):
        m = current[subject]
        f = next(f for f in FACTS if f[0] == subject)
        chosen.append((m, r.choice(f[2:]).format(p=u.person), "updated_fact"))
    buried = once([(m, info[m]["out"].buried) for m in out_ids if info[m]["out"].buried])
    r.shuffle(buried)
    chosen += [(m, q, "buried_error") for m, q in buried[: QUOTA["buried_error"]]]

    queries = [{"query": q, "category": c, "gold": m} for m, q, c in chosen]
    foreign = other_users_words(u.user)
    r.shuffle(foreign)
    for kind, word in foreign[:10]:
        queries.append({"query": r.choice(FOREIGN[kind]).format(w=word), "category": "unanswerable", "gold": None})
    for q in r.sample(UNANSWERABLE, QUOTA["unanswerable"] - 10):
        queries.append({"query": q, "category": "unanswerable", "gold": None})
    return queries


def main() -> None:
    data = {"version": 1, "users": {user: build_user(user) for user in USERS}}
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0, compresslevel=9) as gz:
        gz.write(json.dumps(data, ensure_ascii=False, indent=None, separators=(",", ":")).encode("utf-8"))
    OUT.write_bytes(buf.getvalue())
    for user, d in data["users"].items():
        counts: dict[str, int] = {}
        for m in d["memories"]:
            counts[m["memory_type"]] = counts.get(m["memory_type"], 0) + 1
        for q in d["queries"]:
            counts[q["category"]] = counts.get(q["category"], 0) + 1
        print(user, counts)
    print(f"wrote {OUT} ({OUT.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main()
