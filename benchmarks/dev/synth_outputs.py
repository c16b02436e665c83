"""Command outputs for the synthetic development set.

Each maker takes (world, project, rng, fail) and returns an Output: the agent-style description, the multi-line
content, and query hooks. An exact hook is (query, identifier): the identifier must occur in this memory only.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from synth_vocab import BURIED, BURIED_LANG, CRATES, POD_STATES, PY_EXC, PYPKGS, RUST_ERRORS, WORDS


@dataclass
class Output:
    description: str
    content: str
    exact: list[tuple[str, str]] = field(default_factory=list)
    buried: list[tuple[str, str]] = field(default_factory=list)


def sha(rng: random.Random, n: int = 7) -> str:
    return "".join(rng.choice("0123456789abcdef") for _ in range(n))


def stamp(rng: random.Random, i: int) -> str:
    return f"2026-03-{rng.randint(1, 28):02d}T{(i // 3600) % 24:02d}:{(i // 60) % 60:02d}:{i % 60:02d}Z"


def log_lines(w: dict, proj: str, rng: random.Random, n: int) -> list[str]:
    """Benign service log lines (INFO, DEBUG, the odd WARN) for filler."""
    out = []
    t0 = rng.randint(0, 80000)
    for i in range(n):
        lvl = rng.choices(["INFO", "DEBUG", "WARN"], [70, 25, 5])[0]
        word = rng.choice(WORDS)
        if lvl == "WARN":
            msg = f"slow {word} handler took {rng.randint(800, 3000)}ms (threshold 750ms)"
        elif lvl == "DEBUG":
            msg = f"{word} cache hit ratio={rng.random():.2f} keys={rng.randint(10, 9000)}"
        else:
            msg = (
                f"{rng.choice(['GET', 'POST', 'PUT'])} /v{rng.randint(1, 3)}/{word}s/{rng.randint(1000, 99999)} "
                f"status={rng.choice([200, 200, 200, 201, 204, 304])} dur={rng.randint(2, 400)}ms"
            )
        out.append(f"{stamp(rng, t0 + i * 2)} {lvl:5s} {proj} req={sha(rng, 8)} {msg}")
    return out


def buried_error(w: dict, proj: str, rng: random.Random, pool: list[int]) -> tuple[str, str, bool] | None:
    """The next unused buried error for this user: (line, query phrase, verbatim); None when none is left."""
    lang = next((x[1] for x in w["projects"] if x[0] == proj), None)
    fits = [i for i in pool if BURIED_LANG.get(i) in (None, lang)]
    if not fits:
        return None
    pool.remove(fits[-1])
    line, phrase, gist = BURIED[fits[-1]]
    line = line.format(p=proj, n=rng.randint(10, 99), d=f"{rng.randint(10, 28)}", w=rng.choice(WORDS),
                       hx=sha(rng, 2))  # fmt: skip
    verbatim = rng.random() < 0.5  # the error's words, or what happened in other words
    return line, phrase if verbatim else gist, verbatim


def bury(lines: list[str], err: list[str], rng: random.Random, late: bool = True) -> list[str]:
    at = int(len(lines) * (rng.uniform(0.88, 0.97) if late else rng.uniform(0.55, 0.75)))
    return lines[:at] + err + lines[at:]


def buried_hooks(proj: str, phrase: str, line: str, verbatim: bool, rng: random.Random) -> list[tuple[str, str]]:
    if verbatim:
        forms = [f"which {proj} run hit {phrase}", f"{phrase} in {proj}", f"when did {proj} fail with {phrase}",
                 f"find the output where {proj} reported {phrase}", f"{proj} error: {phrase}"]  # fmt: skip
    else:
        forms = [f"which {proj} run failed because of {phrase}", f"{proj} failure caused by {phrase}",
                 f"find the {proj} output that shows {phrase}", f"when did {proj} break due to {phrase}"]  # fmt: skip
    return [(rng.choice(forms), line)]  # the whole error line must occur in this memory only


# ---------------------------------------------------------------------------- language builds and tests


def python_tests(w, proj, rng, fail, long=False, pool=None, **_):
    mods = rng.sample(WORDS, 6)
    n = rng.randint(900, 1900) if long else rng.randint(15, 160)
    banner = "=" * 29 + " test session starts " + "=" * 30
    lines = [f"$ pytest -q tests/ ({proj})", banner,
             f"platform linux -- Python 3.11.{rng.randint(4, 9)}, pytest-8.{rng.randint(0, 3)}.{rng.randint(0, 4)}",
             f"rootdir: /srv/{proj}", f"collected {n} items", ""]  # fmt: skip
    tests = [f"tests/test_{rng.choice(mods)}.py::test_{rng.choice(WORDS)}_{rng.choice(WORDS)}_{k}" for k in range(n)]
    body = [f"{t} PASSED{' ' * 4}[{100 * (k + 1) // n:3d}%]" for k, t in enumerate(tests)]
    out = Output(f"pytest run of {proj}" + rng.choice(["", " (unit tests)", " on main", " after rebase"]), "")
    if long and pool is not None and (be := buried_error(w, proj, rng, pool)):
        line, phrase, verbatim = be
        victim = tests[int(n * 0.93)]
        body = bury(body, [f"{victim} FAILED", "----- captured log -----", f"E   {line}"], rng)
        out.buried = buried_hooks(proj, phrase, line, verbatim, rng)
        summary = f"==== 1 failed, {n - 1} passed in {rng.randint(60, 900)}.{rng.randint(10, 99)}s ===="
    elif fail:
        victim = rng.choice(tests)
        name = victim.split("::")[1]
        exc = rng.choice(PY_EXC).format(w=rng.choice(WORDS), a=rng.choice([402, 500, 3]), b=rng.choice([200, 0, 4]))
        body += ["", "=================================== FAILURES ===================================",
                 f"_______________________________ {name} _______________________________", "",
                 f"    def {name}(client):", f"        resp = client.{rng.choice(WORDS)}()", ">       assert resp.ok",
                 f"E       {exc}", "", f"{victim.split('::')[0]}:{rng.randint(20, 400)}: {exc.split(':')[0]}",
                 "=========================== short test summary info ============================",
                 f"FAILED {victim} - {exc}"]  # fmt: skip
        out.exact = [(rng.choice([f"{name} failing", f"why does {name} fail", f"{name}"]), name)]
        summary = f"==== 1 failed, {n - 1} passed in {rng.randint(3, 90)}.{rng.randint(10, 99)}s ===="
    else:
        summary = f"==== {n} passed in {rng.randint(3, 90)}.{rng.randint(10, 99)}s ===="
    out.content = "\n".join([*lines, *body, summary])
    return out


def pip_install(w, proj, rng, fail, **_):
    pkgs = rng.sample(PYPKGS, rng.randint(6, 14))
    lines = [f"$ pip install -r requirements.txt  # {proj}"]
    for p in pkgs:
        v = f"{rng.randint(0, 4)}.{rng.randint(0, 30)}.{rng.randint(0, 9)}"
        lines += [f"Collecting {p}=={v}", f"  Downloading {p}-{v}-py3-none-any.whl ({rng.randint(20, 900)} kB)"]
        lines += [f"Requirement already satisfied: {d} in ./.venv/lib/python3.11/site-packages" for d in
                  rng.sample(PYPKGS, 2)]  # fmt: skip
    out = Output(rng.choice([f"pip install for {proj}", f"installing {proj} requirements", f"pip install -r "
                             f"requirements.txt in {proj}"]), "")  # fmt: skip
    if fail:
        bad = f"{w['scope']}-{rng.choice(WORDS)}-client"
        ver = f"{rng.randint(1, 9)}.{rng.randint(0, 20)}.{rng.randint(0, 9)}"
        lines += [
            f"ERROR: Could not find a version that satisfies the requirement {bad}=={ver} (from versions: "
            f"{ver[:-1]}0, {ver[:-1]}1)",
            f"ERROR: No matching distribution found for {bad}=={ver}",
        ]
        out.exact = [
            (rng.choice([f"{bad}=={ver} not found", f"no matching distribution {bad} {ver}"]), f"{bad}=={ver}")
        ]
    else:
        lines.append("Successfully installed " + " ".join(pkgs))
    out.content = "\n".join(lines)
    return out


def cargo_build(w, proj, rng, fail, codes=None, **_):
    deps = rng.sample(CRATES, rng.randint(10, 20))
    deps = [f"{d}-{s}" if k % 2 else d for k, d in enumerate(deps) for s in ("core", "macros")][: rng.randint(18, 40)]
    lines = [f"$ cargo build --release -p {proj}", "    Updating crates.io index"]
    lines += [f"   Compiling {d} v{rng.randint(0, 2)}.{rng.randint(0, 40)}.{rng.randint(0, 20)}" for d in deps]
    lines.append(f"   Compiling {proj} v0.{rng.randint(1, 30)}.0 (/build/{proj})")
    out = Output(rng.choice([f"cargo build of the {proj} crate", f"cargo build --release {proj}",
                             f"building {proj} with cargo"]), "")  # fmt: skip
    if fail and codes:
        code, msg = RUST_ERRORS[codes.pop()]
        var = rng.choice(WORDS) + "_" + rng.choice(["cfg", "buf", "conn", "state"])
        file = f"src/{rng.choice(WORDS)}.rs"
        ln = rng.randint(20, 700)
        lines += [f"error[{code}]: {msg.format(v=var)}", f"   --> {file}:{ln}:{rng.randint(5, 40)}", "    |",
                  f"{ln - 1:4d} |     let {var} = load()?;", f"{ln:4d} |     spawn(move || run({var}));", "    |",
                  f"For more information about this error, try `rustc --explain {code}`.",
                  f"error: could not compile `{proj}` (bin \"{proj}\") due to 1 previous error"]  # fmt: skip
        out.exact = [(rng.choice([f"{code} in {proj}", f"rustc {code} {var}", f"error {code}"]), code)]
    else:
        lines.append(
            f"    Finished `release` profile [optimized] target(s) in {rng.randint(20, 300)}.{rng.randint(0, 9)}s"
        )
    out.content = "\n".join(lines)
    return out


def go_test(w, proj, rng, fail, **_):
    subs = sorted({f"{rng.choice(WORDS)}/{rng.choice(WORDS)}" for _ in range(rng.randint(18, 45))})
    pkgs = [f"github.com/{w['scope']}/{proj}/internal/{x}" for x in subs]
    lines = [f"$ go test ./... ({proj})"]
    out = Output(rng.choice([f"go test ./... in {proj}", f"go tests for {proj}", f"running {proj} go tests"]), "")
    bad = rng.randrange(len(pkgs)) if fail else -1
    for i, p in enumerate(pkgs):
        if i == bad:
            name = f"Test{rng.choice(WORDS).title()}{rng.choice(WORDS).title()}{rng.randint(2, 9)}"
            lines += [f"--- FAIL: {name} ({rng.random():.2f}s)",
                      f"    {p.rsplit('/', 1)[1]}_test.go:{rng.randint(20, 300)}: got {rng.randint(0, 9)}, "
                      f"want {rng.randint(10, 20)}", "FAIL", f"FAIL\t{p}\t{rng.random():.3f}s"]  # fmt: skip
            out.exact = [(rng.choice([f"{name} failure", f"why is {name} failing", name]), name)]
        else:
            lines.append(f"ok  \t{p}\t{rng.random():.3f}s")
    out.content = "\n".join(lines + (["FAIL"] if fail else []))
    return out


def maven_build(w, proj, rng, fail, **_):
    mods = [f"{proj}-{x}" for x in rng.sample(WORDS, rng.randint(3, 6))]
    lines = [f"$ mvn -B clean verify  # {proj}", "[INFO] Scanning for projects...", "[INFO] Reactor Build Order:"]
    lines += [f"[INFO]   {m}" for m in mods]
    for m in mods:
        lines += [
            f"[INFO] ------------------< com.{w['scope']}:{m} >------------------",
            f"[INFO] Building {m} 2.{rng.randint(0, 9)}.{rng.randint(0, 9)}-SNAPSHOT",
            "[INFO] --- maven-compiler-plugin:3.11.0:compile (default-compile) ---",
            f"[INFO] Compiling {rng.randint(10, 200)} source files to /build/{m}/target/classes",
            "[INFO] --- maven-surefire-plugin:3.2.2:test (default-test) ---",
            f"[INFO] Tests run: {rng.randint(10, 300)}, Failures: 0, Errors: 0, Skipped: {rng.randint(0, 3)}",
        ]
    out = Output(rng.choice([f"mvn verify for {proj}", f"maven build of {proj}", f"{proj} maven clean verify"]), "")
    if fail:
        version = f"{rng.randint(1, 5)}.{rng.randint(0, 9)}.{rng.randint(0, 9)}"
        art = f"com.{w['scope']}:{rng.choice(WORDS)}-{rng.choice(['core', 'api', 'model'])}:jar:{version}"
        lines += ["[INFO] BUILD FAILURE", f"[ERROR] Failed to execute goal on project {mods[-1]}: Could not resolve "
                  f"dependencies for project com.{w['scope']}:{mods[-1]}:jar: Could not find artifact {art} in "
                  f"nexus ({w['scope']}-releases)"]  # fmt: skip
        out.exact = [(rng.choice([f"could not find artifact {art}", f"{art} missing"]), art)]
    else:
        lines.append("[INFO] BUILD SUCCESS")
    out.content = "\n".join(lines)
    return out


def gradle_build(w, proj, rng, fail, **_):
    tasks = ["compileKotlin", "compileJava", "processResources", "classes", "jar", "test", "check", "assemble"]
    lines = [f"$ ./gradlew build  # {proj}"]
    for mod in rng.sample(WORDS, rng.randint(3, 6)):
        lines += [f"> Task :{mod}:{t}" for t in tasks]
    out = Output(rng.choice([f"gradle build of {proj}", f"./gradlew build in {proj}", f"{proj} gradle build"]), "")
    if fail:
        ref = rng.choice(WORDS) + rng.choice(["Mapper", "Client", "Codec", "Policy"]) + str(rng.randint(2, 9))
        cls = rng.choice(WORDS).title() + "Service"
        lines += [f"e: file:///build/{proj}/src/main/kotlin/{cls}.kt:{rng.randint(10, 400)}:{rng.randint(3, 40)} "
                  f"Unresolved reference: {ref}", "FAILURE: Build failed with an exception.",
                  "* What went wrong:", "Execution failed for task ':app:compileKotlin'.",
                  f"BUILD FAILED in {rng.randint(20, 200)}s"]  # fmt: skip
        out.exact = [(rng.choice([f"unresolved reference {ref}", f"{ref} kotlin compile error"]), ref)]
    else:
        lines.append(f"BUILD SUCCESSFUL in {rng.randint(20, 200)}s")
    out.content = "\n".join(lines)
    return out


def npm_install(w, proj, rng, fail, **_):
    lines = [f"$ npm ci  # {proj}"]
    lines += [
        f"npm WARN deprecated {rng.choice(WORDS)}-{rng.choice(['utils', 'polyfill', 'shim'])}@"
        f"{rng.randint(0, 5)}.{rng.randint(0, 9)}.0: no longer supported"
        for _ in range(rng.randint(3, 12))
    ]
    lines += [f"npm http fetch GET 200 https://registry.npmjs.org/{rng.choice(WORDS)}-{rng.choice(WORDS)} "
              f"{rng.randint(5, 900)}ms (cache {rng.choice(['hit', 'miss', 'revalidated'])})"
              for _ in range(rng.randint(15, 60))]  # fmt: skip
    out = Output(rng.choice([f"npm ci for {proj}", f"npm install in {proj}", f"installing {proj} node modules"]), "")
    if fail:
        pkg = f"@{w['scope']}/{rng.choice(WORDS)}-widgets@{rng.randint(2, 7)}.{rng.randint(0, 9)}.{rng.randint(0, 9)}"
        lines += ["npm ERR! code ERESOLVE", "npm ERR! ERESOLVE unable to resolve dependency tree",
                  f"npm ERR! While resolving: {proj}@1.0.0", "npm ERR! Could not resolve dependency:",
                  f'npm ERR! peer react@"^{rng.randint(16, 17)}.0.0" from {pkg}',
                  "npm ERR! Fix the upstream dependency conflict, or retry with --legacy-peer-deps"]  # fmt: skip
        out.exact = [(rng.choice([f"ERESOLVE peer conflict {pkg}", f"{pkg} peer dependency"]), pkg)]
    else:
        lines.append(f"added {rng.randint(300, 1800)} packages in {rng.randint(5, 90)}s")
    out.content = "\n".join(lines)
    return out


# ---------------------------------------------------------------------------- infrastructure


def docker_build(w, proj, rng, fail, long=False, pool=None, **_):
    commit = sha(rng)
    steps = [
        "FROM docker.io/library/base:stable",
        "WORKDIR /app",
        "COPY requirements.lock .",
        "RUN install-deps",
        "COPY . .",
        "RUN make build",
        "RUN make test-unit",
        "USER 10001",
        'ENTRYPOINT ["/app/run"]',
    ]
    lines = [f"$ docker build -t registry.{w['scope']}.example/{proj}:{commit} .", '#0 building with "default"']
    for i, s in enumerate(steps, 1):
        lines.append(f"#{i + 3} [{i}/{len(steps)}] {s}")
        lines += [
            f"#{i + 3} {rng.random() * 20:.3f} {rng.choice(['fetching', 'unpacking', 'linking', 'writing'])} "
            f"{rng.choice(WORDS)}-{rng.choice(WORDS)} ({rng.randint(1, 900)} kB)"
            for _ in range(rng.randint(1, 6))
        ]
        if long and s.startswith("RUN make build"):
            lines += [f"#{i + 3} {rng.random() * 90:.3f} compiling {rng.choice(WORDS)}/{rng.choice(WORDS)}.o"
                      for _ in range(rng.randint(600, 1500))]  # fmt: skip
    out = Output(rng.choice([f"docker build of the {proj} image", f"building {proj} container",
                             f"docker build {proj}:{commit}"]), "")  # fmt: skip
    if long and pool is not None and (be := buried_error(w, proj, rng, pool)):
        line, phrase, verbatim = be
        lines = bury(lines, [f"#9 41.202 {line}"], rng)
        out.buried = buried_hooks(proj, phrase, line, verbatim, rng)
    if fail:
        code = rng.choice([1, 2, 127, 137])
        lines += [f"#9 ERROR: process \"/bin/sh -c make test-unit\" did not complete successfully: exit code: {code}",
                  f"ERROR: failed to solve: process \"/bin/sh -c make test-unit\" did not complete successfully: "
                  f"exit code: {code}"]  # fmt: skip
        out.exact = [(rng.choice([f"docker build {commit} failed", f"image build for commit {commit}"]), commit)]
    else:
        lines += ["#14 exporting to image", f"#14 naming to registry.{w['scope']}.example/{proj}:{commit} done"]
    out.content = "\n".join(lines)
    return out


def kubectl_pods(w, proj, rng, fail, ns=None, **_):
    lines = [
        f"$ kubectl get pods -n {ns} -o wide --context {w['cluster']}",
        f"{'NAME':46s}READY   STATUS             RESTARTS   AGE    NODE",
    ]
    out = Output(rng.choice([f"kubectl get pods -n {ns}", f"pods in {ns} namespace", f"{proj} pod status"]), "")
    comps = [proj, f"{proj}-worker", f"{proj}-cron", f"{proj}-migrate"]
    bad = rng.randint(0, 5) if fail else -1
    for i in range(rng.randint(18, 40)):
        pod = f"{rng.choice(comps)}-{sha(rng, 9)}-{sha(rng, 5)}"
        status = rng.choice(POD_STATES) if i == bad else "Running"
        restarts = rng.randint(5, 60) if i == bad else rng.randint(0, 2)
        lines.append(
            f"{pod:46s}{'0/1' if i == bad else '1/1':8s}{status:19s}{restarts:<11d}{rng.randint(1, 40)}d"
            f"    {w['cluster']}-node-{rng.randint(1, 12)}"
        )
        if i == bad:
            out.exact = [(rng.choice([f"{pod} {status}", f"why is {pod} restarting", pod]), pod)]
    out.content = "\n".join(lines)
    return out


def terraform_plan(w, proj, rng, fail, **_):
    env = rng.choice(["staging", "prod", "dev"])
    lines = [f"$ terraform plan -var-file={env}.tfvars  # {proj}", "Refreshing state..."]
    res = []
    for _ in range(rng.randint(5, 25)):
        kind = rng.choice(["aws_instance", "aws_db_instance", "aws_security_group_rule", "aws_iam_role_policy",
                           "aws_route53_record", "aws_lb_target_group", "aws_elasticache_cluster"])  # fmt: skip
        name = f"{proj.replace('-', '_')}_{rng.choice(WORDS)}_{rng.randint(1, 99)}"
        res.append(f"{kind}.{name}")
        op = rng.choice(["+", "~", "-/+", "+"])
        lines += [
            f"  # module.{env}.{kind}.{name} will be {'created' if op == '+' else 'updated in-place'}",
            f'  {op} resource "{kind}" "{name}" {{',
            f'      + tags = {{ "env" = "{env}" }}',
            "    }",
        ]
    out = Output(rng.choice([f"terraform plan for {env}", f"terraform plan {proj} {env}", f"tf plan ({env}, {proj})"]),
                 "")  # fmt: skip
    if fail:
        r = rng.choice(res)
        lines += ["", f"│ Error: creating {r.split('.')[0]} ({r.split('.')[1]}): operation error: "
                  "api error InvalidParameterCombination: the requested instance class is not supported",
                  f"│   with module.{env}.{r},", f"│   on main.tf line {rng.randint(10, 400)}"]  # fmt: skip
        out.exact = [(rng.choice([f"terraform error on {r}", f"{r} InvalidParameterCombination"]), r)]
    else:
        lines.append(
            f"Plan: {rng.randint(1, 9)} to add, {rng.randint(0, 5)} to change, {rng.randint(0, 3)} to destroy."
        )
    out.content = "\n".join(lines)
    return out


def ansible_run(w, proj, rng, fail, **_):
    hosts = rng.sample(w["hosts"], 3)
    lines = [f"$ ansible-playbook -i inventories/{rng.choice(['staging', 'prod'])} site.yml --limit {proj}", "",
             f"PLAY [{proj} servers] ****************************************************"]  # fmt: skip
    tasks = [
        f"{rng.choice(['common', proj, 'nginx', 'postgres'])} : "
        f"{rng.choice(['install', 'template', 'restart', 'ensure'])} "
        f"{rng.choice(WORDS)} {rng.choice(['config', 'service', 'package', 'directory'])}"
        for _ in range(rng.randint(5, 20))
    ]
    bad = rng.randrange(len(tasks) // 2, len(tasks)) if fail else -1
    out = Output(rng.choice([f"ansible-playbook site.yml for {proj}", f"ansible run against {proj} hosts",
                             f"provisioning {proj} with ansible"]), "")  # fmt: skip
    for i, t in enumerate(tasks):
        lines.append(f"TASK [{t}] ********************************")
        for h in hosts:
            if i == bad and h == hosts[0]:
                lines.append(
                    f'fatal: [{h}]: FAILED! => {{"changed": false, "msg": "Unable to start service '
                    f'{proj}-{t.split()[-2]}: Job for {proj}-{t.split()[-2]}.service failed"}}'
                )
                out.exact = [(rng.choice([f"ansible task {t} failed on {h}", f"{t} fatal"]), f"[{t}]")]
            else:
                lines.append(f"{rng.choice(['ok', 'changed', 'ok'])}: [{h}]")
        if i == bad:
            break
    lines.append("PLAY RECAP *****")
    lines += [
        f"{h:40s}: ok={rng.randint(5, 40)} changed={rng.randint(0, 9)} failed={int(fail and h == hosts[0])}"
        for h in hosts
    ]
    out.content = "\n".join(lines)
    return out


def psql_query(w, proj, rng, fail, **_):
    t = rng.choice(w["tables"])
    host = w["hosts"][rng.choice([0, 4])]
    out = Output(rng.choice([f"psql: {t} by day, last 7 days", f"query on {t} ({host})", f"row counts for {t}"]), "")
    lines = [f"$ psql -h {host} -c \"SELECT date_trunc('day', created_at) d, count(*) FROM {t} GROUP BY 1 ORDER BY 1\""]
    if fail:
        key = f"{t}_{rng.choice(WORDS)}_{rng.choice(['key', 'idx', 'uniq'])}"
        out.description = rng.choice([f"psql: running migration on {t}", f"applying {proj} migration to {host}"])
        lines = [f"$ psql -h {host} -v ON_ERROR_STOP=1 -f migrations/{rng.randint(100, 400):04d}_{t}.sql", "BEGIN"]
        for _ in range(rng.randint(18, 40)):
            col = f"{rng.choice(WORDS)}_{rng.choice(['id', 'at', 'count', 'ref'])}"
            lines += [
                rng.choice(["ALTER TABLE", "CREATE INDEX", "UPDATE " + str(rng.randint(1, 9000))])
                + (f" -- {t}.{col}" if rng.random() < 0.5 else "")
            ]
        lines += [
            f'ERROR:  duplicate key value violates unique constraint "{key}"',
            f"DETAIL:  Key (id)=({rng.randint(10000, 999999)}) already exists.",
            "SQLSTATE: 23505",
        ]
        out.exact = [(rng.choice([f"unique constraint {key} violated", f"{key} duplicate key"]), key)]
    else:
        lines += ["          d          | count", "---------------------+-------"]
        n = rng.randint(16, 120)
        lines += [
            f" 2026-0{rng.randint(1, 3)}-{d % 28 + 1:02d} 00:00:00 | {rng.randint(100, 90000):6d}" for d in range(n)
        ]
        lines.append(f"({n} rows)")
    out.content = "\n".join(lines)
    return out


def log_excerpt(w, proj, rng, fail, long=False, pool=None, **_):
    host = rng.choice(w["hosts"])
    n = rng.randint(700, 2000) if long else rng.randint(20, 250)
    lines = [f"$ journalctl -u {proj} --since '2 hours ago' (on {host})", *log_lines(w, proj, rng, n)]
    out = Output(rng.choice([f"journalctl excerpt from {proj} on {host}", f"{proj} service logs ({host})",
                             f"last two hours of {proj} logs"]), "")  # fmt: skip
    if long and pool is not None and (be := buried_error(w, proj, rng, pool)):
        line, phrase, verbatim = be
        lines = bury(lines, [f"{stamp(rng, 50000)} ERROR {proj} {line}"], rng, late=rng.random() < 0.7)
        out.buried = buried_hooks(proj, phrase, line, verbatim, rng)
    out.content = "\n".join(lines)
    return out


def ci_log(w, proj, rng, fail, long=False, pool=None, **_):
    run = rng.randint(10_000_000, 99_999_999)
    steps = [
        "Set up job",
        "Checkout",
        "Restore cache",
        "Install dependencies",
        "Lint",
        "Unit tests",
        "Build",
        "Integration tests",
        "Upload artifacts",
    ]
    lines = [f"CI run {run} for {proj} on {w['hosts'][2]} (ref refs/heads/{rng.choice(['main', 'release', 'feat'])})"]
    for s in steps:
        lines.append(f"##[group]{s}")
        lines += log_lines(w, proj, rng, rng.randint(150, 250) if long else rng.randint(2, 15))
        lines.append("##[endgroup]")
    out = Output(rng.choice([f"CI log: {proj} pipeline", f"{proj} CI run {run}", f"pipeline output for {proj}"]), "")
    if long and pool is not None and (be := buried_error(w, proj, rng, pool)):
        line, phrase, verbatim = be
        lines = bury(lines, [f"##[error]{line}"], rng)
        out.buried = buried_hooks(proj, phrase, line, verbatim, rng)
    if fail:
        lines += [
            f"##[error]Integration tests: job {run} failed after {rng.randint(2, 40)}m",
            "Error: Process completed with exit code 1.",
        ]
        out.exact = [(rng.choice([f"CI run {run}", f"why did run {run} fail"]), str(run))]
    out.content = "\n".join(lines)
    return out


BY_LANGUAGE = {"python": [python_tests, pip_install], "rust": [cargo_build], "go": [go_test],
               "java": [maven_build], "kotlin": [gradle_build], "node": [npm_install]}  # fmt: skip
INFRA = [docker_build, kubectl_pods, terraform_plan, ansible_run, psql_query, log_excerpt, ci_log]
LONG = [python_tests, docker_build, log_excerpt, ci_log, log_excerpt]
