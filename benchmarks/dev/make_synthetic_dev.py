"""Generate the synthetic DEVELOPMENT set for memory search (tuning may use it; benchmarks/heldout/ stays frozen).

python benchmarks/dev/make_synthetic_dev.py  ->  benchmarks/dev/synthetic_dev.json.gz

Four users (dev-u1..dev-u4), ~300 memories each in storage order (command outputs, preferences, facts with later
updates, notes) and ~73 queries each: exact, paraphrase, preference, updated_fact, buried_error, unanswerable.
Deterministic: fixed seeds, pure Python, gzip mtime 0. Written independently of benchmarks/heldout/.
"""

from __future__ import annotations

import gzip
import json
import random
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from synth_facts import FACT_CONTENT, FACTS, PREFERENCES  # noqa: E402
from synth_outputs import BY_LANGUAGE, INFRA, LONG, Output  # noqa: E402
from synth_vocab import BURIED, RUST_ERRORS  # noqa: E402
from synth_worlds import ABSENT_TOPICS, DOMAIN_TOPICS, GENERIC_TOPICS, OFF_TOPIC, WORLDS  # noqa: E402

SEED = 20260317
OUT = HERE / "synthetic_dev.json.gz"
USERS = list(WORLDS)
N_OUTPUTS, N_LONG, N_MEETINGS, N_TODOS = 150, 20, 30, 26
QUOTA = {"exact": 14, "paraphrase": 14, "preference": 9, "updated_fact": 8, "buried_error": 10}
N_OTHER, N_ABSENT, N_OFF = 6, 6, 6

MEETING_ITEMS = [
    "{p} error rate back under 0.1% after the hotfix",
    "{a} still blocked on access to {h}",
    "agreed to postpone the {p} schema cleanup by one sprint",
    "load test for {p} scheduled for Thursday night",
    "{b} demoed the new dashboard for {t}",
    "flaky integration test in {p} quarantined, owner {a}",
    "{p} p95 latency regressed 40ms since the last release",
    "budget approved for the {q} contractor",
    "security scan found two medium issues in {p}'s base image",
    "{a} and {b} pairing on the {q} migration",
    "customer escalation about missing rows in {t} is resolved",
    "nobody owns the cron jobs on {h} yet",
    "{q} release candidate cut, soak test running",
    "documentation for {p} onboarding is out of date",
]
ACTIONS = [
    "write the post-mortem",
    "add an alert for {t} growth",
    "upgrade {p} to the new client library",
    "clean up unused indexes on {t}",
    "rotate credentials on {h}",
    "pin the {q} base image",
    "draft the {p} rollout plan",
    "investigate memory growth in {q}",
    "review the {p} dashboards",
    "migrate {q} jobs off {h}",
    "benchmark {p} with the new driver",
    "archive old partitions of {t}",
]


def fill(text: str, w: dict, rng: random.Random, p: str | None = None) -> str:
    projects = [x[0] for x in w["projects"]]
    p = p or rng.choice(projects)
    a, b = rng.sample(w["people"], 2)
    ns = next(x[2] for x in w["projects"] if x[0] == p)
    return text.format(p=p, q=rng.choice([x for x in projects if x != p]), a=a, b=b, h=rng.choice(w["hosts"]),
                       t=rng.choice(w["tables"]), n=rng.choice([3, 5, 7, 30, 45, 90, 500]), ns=ns)  # fmt: skip


def mem(kind: str, description: str, content: str, **hooks: object) -> dict:
    return {"memory_type": kind, "description": description, "content": content, "hooks": hooks}


def outputs(user: str, w: dict, rng: random.Random) -> list[dict]:
    pool = list(range(len(BURIED)))
    rng.shuffle(pool)
    codes = list(range(len(RUST_ERRORS)))
    rng.shuffle(codes)
    long_at = set(rng.sample(range(N_OUTPUTS), N_LONG))
    out = []
    for i in range(N_OUTPUTS):
        name, lang, ns = rng.choice(w["projects"])
        fail = rng.random() < 0.38
        if i in long_at:
            makers = [x for x in LONG if x.__name__ != "python_tests" or lang == "python"]
            o: Output = rng.choice(makers)(w, name, rng, False, long=True, pool=pool)
        elif rng.random() < 0.45:
            o = rng.choice(BY_LANGUAGE[lang])(w, name, rng, fail, codes=codes)
        else:
            o = rng.choice(INFRA)(w, name, rng, fail, ns=ns)
        out.append(mem("command_output", o.description, o.content, exact=o.exact, buried=o.buried))
    return out


def notes(user: str, w: dict, rng: random.Random) -> list[dict]:
    out = []
    for desc, content, para, _markers in DOMAIN_TOPICS[user]:
        out.append(mem("note", desc, content, para=[para]))
    projects = [x[0] for x in w["projects"]]
    for desc, content, para in GENERIC_TOPICS:
        p = rng.choice(projects)
        out.append(mem("note", fill(desc, w, rng, p), fill(content, w, rng, p), para=[fill(para, w, rng, p)]))
    tickets = rng.sample(range(1000, 9999), N_MEETINGS + N_TODOS)
    for i in range(N_MEETINGS):
        p = rng.choice(projects)
        day = f"2026-{rng.randint(1, 3):02d}-{rng.randint(1, 28):02d}"
        items = [fill(x, w, rng, p) for x in rng.sample(MEETING_ITEMS, rng.randint(3, 6))]
        tid = f"{w['ticket']}-{tickets[i]}"
        act = fill(rng.choice(ACTIONS), w, rng, p)
        who = rng.choice(w["people"])
        body = [
            f"{rng.choice(['Weekly', 'Biweekly', 'Ad-hoc'])} {p} sync, {day}. Attendees: "
            f"{', '.join(rng.sample(w['people'], 3))}.",
            *[f"- {x}" for x in items],
            f"Action: {tid} {who} to {act}.",
        ]
        out.append(mem("note", f"meeting notes: {p} sync {day}", "\n".join(body),
                       exact=[(rng.choice([tid, f"status of {tid}", f"who took {tid}"]), tid)]))  # fmt: skip
    for i in range(N_TODOS):
        p = rng.choice(projects)
        tid = f"{w['ticket']}-{tickets[N_MEETINGS + i]}"
        acts = [fill(x, w, rng, p) for x in rng.sample(ACTIONS, rng.randint(2, 4))]
        body = [f"TODO for {p}:", *[f"[ ] {x}" for x in acts], f"Tracked in {tid}."]
        out.append(mem("note", f"todo: {p} {acts[0]}", "\n".join(body),
                       exact=[(rng.choice([f"{tid} todo list", tid]), tid)]))  # fmt: skip
    return out


def facts_and_prefs(user: str, w: dict, rng: random.Random) -> tuple[list[dict], list[list[dict]]]:
    """Preferences and first versions of facts; and for each updatable subject, its later versions."""
    ui = USERS.index(user)
    base = [mem("user_preference", f"{s}: {vals[ui]}", tpl.format(v=vals[ui]), task=q)
            for s, vals, tpl, q in PREFERENCES]  # fmt: skip
    chains = []
    keep = [f for f in FACTS if f[3]] + rng.sample([f for f in FACTS if not f[3]], 14)
    updates = [1, 1, 1, 1, 2, 2, 2, 3]
    rng.shuffle(updates)
    for s, make, para, updatable in keep:
        v = make(w, rng, 0)
        first = mem("user_fact", f"{s}: {v}", rng.choice(FACT_CONTENT).format(s=s, v=v), para=[para], subject=s)
        if not updatable:
            base.append(first)
            continue
        chain = [first]
        for k in range(updates.pop()):
            old = v
            while v == old:
                v = make(w, rng, k + 1)
            content = rng.choice([f"Update: the {s} is now {v} (it was {old}).", f"{s} changed to {v}.",
                                  f"From today the {s} is {v}."])  # fmt: skip
            chain.append(mem("user_fact", f"{s}: {v}", content, para=[para], subject=s))
        chains.append(chain)
    return base, chains


def text_of(m: dict) -> str:
    return (m["description"] + "\n" + m["content"]).lower()


def build_user(user: str) -> dict:
    w = WORLDS[user]
    rng = random.Random(f"{SEED}-{user}")
    base, chains = facts_and_prefs(user, w, rng)
    stream = outputs(user, w, rng) + notes(user, w, rng) + base + [c[0] for c in chains]
    rng.shuffle(stream)
    for chain in chains:  # later versions go somewhere after the previous one
        for m in chain[1:]:
            prev = next(i for i, x in enumerate(stream) if x is chain[chain.index(m) - 1])
            stream.insert(rng.randint(prev + 1, len(stream)), m)
    for i, m in enumerate(stream):
        m["id"] = f"{user[-2:]}-m{i:03d}"
    texts = [text_of(m) for m in stream]

    def unique(ident: str) -> bool:
        return sum(ident.lower() in t for t in texts) == 1

    cands: dict[str, list[dict]] = {c: [] for c in QUOTA}
    for m in stream:
        h = m["hooks"]
        for q, ident in h.get("exact", []):
            if unique(ident):
                cands["exact"].append({"query": q, "category": "exact", "gold": m["id"], "src": m["memory_type"]})
        for q, ident in h.get("buried", []):
            if unique(ident):
                cands["buried_error"].append({"query": q, "category": "buried_error", "gold": m["id"]})
        if h.get("task"):
            cands["preference"].append({"query": h["task"], "category": "preference", "gold": m["id"]})
        if m["memory_type"] == "note" and h.get("para"):
            cands["paraphrase"].append({"query": h["para"][0], "category": "paraphrase", "gold": m["id"]})
    for chain in chains:
        newest = chain[-1]
        subject = newest["hooks"]["subject"]
        if rng.random() < 0.5:  # the subject's own words: only the newest version should come back
            q = rng.choice(["what is the {} now", "current {}", "latest {}", "{}?"]).format(subject)
        else:  # other words
            q = newest["hooks"]["para"][0]
        cands["updated_fact"].append({"query": q, "category": "updated_fact", "gold": newest["id"]})
    updated = {c[0]["hooks"]["subject"] for c in chains}
    fact_para = [
        {"query": m["hooks"]["para"][0], "category": "paraphrase", "gold": m["id"]}
        for m in stream
        if m["memory_type"] == "user_fact" and m["hooks"]["subject"] not in updated
    ]

    queries = []
    for cat, n in QUOTA.items():
        pool = cands[cat]
        if cat == "exact":  # half from outputs, half from notes
            outs = [q for q in pool if q["src"] == "command_output"]
            nts = [q for q in pool if q["src"] == "note"]
            pick = rng.sample(outs, n - n // 2 - 1) + rng.sample(nts, n // 2 + 1)
        elif cat == "paraphrase":
            pick = rng.sample(pool, n - 3) + rng.sample(fact_para, 3)
        else:
            assert len(pool) >= n, (user, cat, len(pool))
            pick = rng.sample(pool, n)
        for q in pick:
            q.pop("src", None)
        queries += pick
    queries += unanswerable(user, texts, rng)
    rng.shuffle(queries)
    memories = [{k: m[k] for k in ("id", "memory_type", "description", "content")} for m in stream]
    return {"memories": memories, "queries": queries}


def unanswerable(user: str, texts: list[str], rng: random.Random) -> list[dict]:
    """Queries with no answer: other users' words, topics nobody stored, and unrelated questions."""
    others = [u for u in USERS if u != user]
    cands = []
    for o in others:
        for desc, _c, _p, markers in DOMAIN_TOPICS[o]:
            topic = desc.split(": ", 1)[1]
            cands.append((rng.choice([topic, f"what did we decide on the {topic}", f"notes about {topic}"]), markers))
        for p, _lang, _ns in WORLDS[o]["projects"]:
            what = rng.choice(["build errors", "deploy failing", "pods restarting", "retry policy", "test failures"])
            cands.append((f"{p} {what}", [p]))
    picked = []
    rng.shuffle(cands)
    for q, markers in cands:
        if len(picked) == N_OTHER:
            break
        if all(mk.lower() in q.lower() for mk in markers[:1]) and not any(
            mk.lower() in t for mk in markers for t in texts
        ):
            picked.append(q)
    assert len(picked) == N_OTHER, user
    absent = rng.sample(ABSENT_TOPICS, N_ABSENT)
    for _q, markers in absent:
        assert not any(mk in t for mk in markers for t in texts), (user, markers)
    qs = picked + [q for q, _m in absent] + rng.sample(OFF_TOPIC, N_OFF)
    return [{"query": q, "category": "unanswerable", "gold": None} for q in qs]


def main() -> None:
    data = {"version": 1, "users": {u: build_user(u) for u in USERS}}
    raw = json.dumps(data, ensure_ascii=False, sort_keys=True).encode()
    with open(OUT, "wb") as f, gzip.GzipFile(filename="", mode="wb", fileobj=f, mtime=0, compresslevel=9) as gz:
        gz.write(raw)
    for u, d in data["users"].items():
        kinds: dict[str, int] = {}
        for m in d["memories"]:
            kinds[m["memory_type"]] = kinds.get(m["memory_type"], 0) + 1
        cats: dict[str, int] = {}
        for q in d["queries"]:
            cats[q["category"]] = cats.get(q["category"], 0) + 1
        lines = sum(m["content"].count("\n") + 1 for m in d["memories"])
        print(u, len(d["memories"]), kinds, cats, f"{lines} content lines")
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
