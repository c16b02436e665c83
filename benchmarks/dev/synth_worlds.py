"""Per-user worlds for the synthetic development set: projects, hosts, people, domain topics.

Every user's names are distinct from every other user's, so a query using one user's words is unanswerable for
the others. Nothing here comes from benchmarks/heldout/.
"""

from __future__ import annotations

# Each project: (name, language, k8s namespace); language picks the build/test outputs. Hosts by role: primary
# database, a service host, CI, bastion, replica database, edge.
WORLDS: dict[str, dict] = {
    "dev-u1": {
        "org": "northwind pay",
        "domain": "payments",
        "projects": [("ledgerd", "rust", "ledger"), ("paygate", "go", "payments"),
                     ("fxquote", "python", "pricing"), ("settlement-batch", "java", "settle")],
        "hosts": ["pg-ledger-01.nwp.internal", "cache-pay-3.nwp.internal", "ci-runner-07.nwp.internal",
                  "bastion-fra-2.nwp.internal", "pg-ledger-replica-02.nwp.internal", "gw-fra-1.nwp.internal"],
        "people": ["Marta Kowalski", "Idris Okafor", "Lena Brandt", "Tomasz Wilk", "Priya Raman", "Jonas Eder"],
        "ticket": "LED",
        "cluster": "fra-prod-k8s",
        "region": "eu-central-1",
        "tables": ["ledger_entries", "payouts", "fx_rates", "merchant_accounts", "chargebacks"],
        "scope": "nwp",
    },
    "dev-u2": {
        "org": "carewell health",
        "domain": "healthcare",
        "projects": [("carebridge", "python", "care"), ("vitals-ingest", "go", "vitals"),
                     ("rxsync", "kotlin", "pharmacy"), ("patient-portal", "node", "portal")],
        "hosts": ["db-care-main.cwh.lan", "mq-vitals-2.cwh.lan", "build-box-11.cwh.lan", "jump-ams-1.cwh.lan",
                  "db-care-standby.cwh.lan", "edge-ams-4.cwh.lan"],
        "people": ["Ana Sousa", "Kwame Mensah", "Hiroko Tanaka", "Felix Moreau", "Dana Whitfield", "Omar Haddad"],
        "ticket": "CARE",
        "cluster": "ams-clinical-k8s",
        "region": "eu-west-4",
        "tables": ["encounters", "prescriptions", "vital_readings", "consent_forms", "appointments"],
        "scope": "carewell",
    },
    "dev-u3": {
        "org": "skyforge games",
        "domain": "games",
        "projects": [("shardmaster", "rust", "shards"), ("lobbysvc", "go", "lobby"),
                     ("replayforge", "python", "replays"), ("matchmaker-ui", "node", "mm-web")],
        "hosts": ["pg-shards-02.skyf.net", "gs-euw-14.skyf.net", "buildfarm-5.skyf.net", "jump-sea-2.skyf.net",
                  "pg-shards-03.skyf.net", "relay-sea-3.skyf.net"],
        "people": ["Yuki Sato", "Brennan Doyle", "Sofia Lindqvist", "Mateus Rocha", "Aisha Bello", "Viktor Hahn"],
        "ticket": "SHRD",
        "cluster": "sea-games-k8s",
        "region": "us-west-2",
        "tables": ["player_profiles", "match_results", "lobby_sessions", "replay_index", "season_rewards"],
        "scope": "skyforge",
    },
    "dev-u4": {
        "org": "bluehaul logistics",
        "domain": "logistics",
        "projects": [("routeplanner", "python", "routing"), ("dockyard", "java", "yard"),
                     ("fleettrack", "go", "fleet"), ("manifest-api", "kotlin", "manifests")],
        "hosts": ["pg-routes-1.bhl.corp", "gps-ingest-6.bhl.corp", "jenkins-agent-9.bhl.corp", "vpn-osl-2.bhl.corp",
                  "pg-routes-2.bhl.corp", "edge-osl-5.bhl.corp"],
        "people": ["Grace Njoroge", "Pablo Ortega", "Ingrid Solberg", "Rahul Mehta", "Chloe Dubois", "Sam Okoye"],
        "ticket": "FLT",
        "cluster": "osl-ops-k8s",
        "region": "eu-north-1",
        "tables": ["shipments", "vehicle_positions", "dock_slots", "driver_shifts", "customs_declarations"],
        "scope": "bluehaul",
    },
}  # fmt: skip

# Domain topics: (description, content, paraphrase question, distinctive marker words for the "other user" check).
DOMAIN_TOPICS: dict[str, list[tuple[str, str, str, list[str]]]] = {
    "dev-u1": [
        ("decision: chargeback evidence window",
         "Decided with Priya that chargeback evidence packets are assembled within 5 business days of the "
         "dispute notice; ledgerd flags late ones in the morning report.",
         "how long do we have to put together documents when a cardholder disputes a payment", ["chargeback"]),
        ("runbook: reconcile payouts against the bank statement",
         "1. Export yesterday's payouts from pg-ledger-01. 2. Download the camt.053 statement from the bank portal. "
         "3. Run settlement-batch reconcile --date. 4. Unmatched lines go to the SEPA exceptions sheet.",
         "steps to match what we paid out with what the bank says", ["camt.053", "sepa"]),
        ("note: fx rate staleness threshold",
         "fxquote refuses to price when the newest ECB reference rate is older than 90 seconds; the alert "
         "fires after three refusals in a minute.",
         "when does the currency conversion service stop giving prices because its data is too old", ["ecb"]),
        ("decision: interchange fee rounding",
         "Interchange fees are rounded half-even to the minor unit per transaction, never on the daily total; "
         "Lena signed off after the audit finding.",
         "how do we round the card network charges", ["interchange"]),
        ("meeting: PSD2 strong customer authentication rollout",
         "SCA exemptions for low-value payments under 30 EUR go live with paygate 4.2. Idris owns the 3DS2 "
         "challenge flow; Jonas writes the merchant FAQ.",
         "who is doing the extra login check for card payments in the european rollout", ["psd2", "3ds2"]),
        ("runbook: rotating the merchant webhook signing secret",
         "Generate the new HMAC secret in the admin console, keep both secrets valid for 24 hours, then revoke "
         "the old one; paygate logs signature mismatches under webhook.sig_invalid.",
         "how to change the key we use to sign callbacks to shops", ["hmac"]),
        ("decision: ledger double-entry invariant check",
         "Every ledgerd commit verifies that debits equal credits per currency before fsync; a violation aborts "
         "the batch and pages the on-call.",
         "what stops the books from going out of balance when we write transactions", ["debits", "credits"]),
        ("todo: AML screening backlog",
         "Clear the 212 pending anti-money-laundering screening hits before the quarterly review; Tomasz to ask "
         "compliance about the sanctions list refresh cadence.",
         "how many suspicious customer checks are still waiting", ["anti-money-laundering", "sanctions"]),
    ],
    "dev-u2": [
        ("decision: HL7 feed retry window",
         "vitals-ingest retries a rejected HL7 v2 message for 6 hours before moving it to the dead-letter table; "
         "Kwame agreed the ward monitors can tolerate that.",
         "how long do we keep trying to deliver a bounced hospital message", ["hl7"]),
        ("runbook: restoring a patient's revoked consent",
         "Only a clinician with the consent-admin role can restore; run carebridge consent restore --patient "
         "and attach the signed paper form scan to the encounter.",
         "how do we undo it when someone withdrew permission to use their records", ["clinician"]),
        ("note: FHIR bundle size limit",
         "The national exchange rejects FHIR bundles above 8 MB, so rxsync splits medication histories into "
         "pages of 200 entries.",
         "why are medication histories sent in chunks", ["fhir"]),
        ("decision: PHI redaction in logs",
         "Protected health information is never logged; carebridge masks MRNs and dates of birth in the log "
         "formatter, and Hiroko reviews new log lines in PRs.",
         "what do we do to keep personal medical data out of the logs", ["phi", "mrn"]),
        ("meeting: e-prescribing controlled substances",
         "EPCS needs two-factor signing by the prescriber; Felix will integrate the token provider in rxsync "
         "and Dana drafts the pharmacy notice.",
         "who is building two-step signing for narcotics orders", ["epcs", "prescriber"]),
        ("runbook: ward monitor clock drift",
         "If bedside monitors drift more than 2 seconds, vitals-ingest marks readings as suspect; resync the "
         "monitor gateway with chronyc makestep on mq-vitals-2.",
         "what to do when bedside devices report the wrong time", ["bedside"]),
        ("decision: appointment reminder cadence",
         "patient-portal sends reminders 72 and 24 hours before an appointment, SMS first and email as fallback; "
         "no reminders between 21:00 and 08:00.",
         "when do people get nudged about their upcoming visit", ["reminders"]),
        ("todo: HIPAA access review",
         "Quarterly access review of the encounters table due Friday; Omar exports the role grants and Ana "
         "signs the attestation.",
         "who signs off on the quarterly check of who can read records", ["hipaa", "attestation"]),
    ],
    "dev-u3": [
        ("decision: matchmaking elo decay",
         "Elo ratings decay by 15 points per week of inactivity after 21 days, floor at the season placement; "
         "Sofia tuned it on last season's match_results.",
         "how fast do skill scores drop for players who stop playing", ["elo"]),
        ("runbook: draining a game server before patch day",
         "Mark gs-euw-14 as draining in shardmaster, wait for active matches to end (max 40 minutes), then "
         "kick remaining lobbies with a 5-minute warning.",
         "how do we empty a server so we can update it", ["draining"]),
        ("note: replay file format v3",
         "replayforge writes v3 replays as zstd-compressed frames with a keyframe every 300 ticks; v2 files are "
         "converted lazily on first view.",
         "how are recorded matches stored on disk", ["keyframe", "ticks"]),
        ("decision: anti-cheat ban appeals",
         "Automated anti-cheat bans can be appealed once; Brennan's team reviews the telemetry within 72 hours "
         "and a second offence is permanent.",
         "what happens when a player disagrees with being kicked for cheating", ["anti-cheat"]),
        ("meeting: season 9 battle pass",
         "Season 9 battle pass ships with 80 tiers; Aisha owns the season_rewards migration and Mateus the "
         "storefront banner.",
         "who is handling the database change for the new seasonal reward track", ["battle pass"]),
        ("runbook: relay packet loss investigation",
         "If relay-sea-3 shows more than 2% packet loss, capture with tcpdump on the UDP game port, compare "
         "with the lb-sea-1 mirror and open a ticket with the transit provider.",
         "what to check when players complain about lag spikes on the west coast", ["udp", "relay"]),
        ("decision: lobby size cap",
         "Custom lobbies are capped at 16 players; lobbysvc rejects joins beyond that with LOBBY_FULL.",
         "what is the maximum number of people in a private room", ["lobby_full"]),
        ("todo: loot box odds disclosure",
         "Publish the drop-rate table for every crate before the regional regulator deadline; Viktor exports "
         "the odds from the economy config.",
         "who is pulling the probabilities for the random reward crates", ["drop-rate", "crate"]),
    ],
    "dev-u4": [
        ("decision: customs declaration cutoff",
         "Customs declarations for Norway-bound trailers must be filed 2 hours before arrival at the border; "
         "manifest-api blocks dispatch otherwise.",
         "how early do we have to send the border paperwork", ["customs"]),
        ("runbook: reassigning a dock slot",
         "In dockyard open the dock_slots board, release the slot with reason code DS-07, and notify the carrier "
         "through the EDI 214 status message.",
         "how do we move a truck's unloading appointment to another bay", ["edi", "dock slot"]),
        ("note: GPS ping interval",
         "fleettrack asks trucks for a position every 30 seconds on motorways and every 10 seconds inside "
         "geofenced depots.",
         "how often do vehicles report where they are", ["geofenced"]),
        ("decision: driver hours-of-service limits",
         "routeplanner never plans more than 9 hours of driving per shift and inserts a 45-minute break after "
         "4.5 hours, per the EU tachograph rules.",
         "how long can someone behind the wheel go before a mandatory pause", ["tachograph"]),
        ("meeting: cold chain monitoring pilot",
         "Reefer trailers get temperature sensors in the pilot; Rahul owns the alert thresholds and Chloe the "
         "customer report.",
         "who decides when a refrigerated load is too warm", ["reefer", "cold chain"]),
        ("runbook: recovering a stuck route optimisation",
         "If a routeplanner solve exceeds 15 minutes, cancel it, lower the vehicle count per cluster to 40 and "
         "resubmit; the OR-Tools log is under /var/log/routeplanner/solver.",
         "what to do when the delivery schedule calculation hangs", ["or-tools", "solver"]),
        ("decision: pallet label format",
         "SSCC-18 barcodes on every pallet label, printed at 203 dpi; dockyard rejects scans without the check "
         "digit.",
         "which barcode goes on the shipping units", ["sscc", "pallet"]),
        ("todo: fuel surcharge table",
         "Update the diesel surcharge table for the new quarter; Pablo gets the index from the carrier "
         "association and Ingrid reviews.",
         "who is refreshing the extra charge we add for diesel prices", ["surcharge", "diesel"]),
    ],
}  # fmt: skip

# Generic decision/runbook topics, filled per user: {p} project, {q} a second project, {a}/{b} people, {h} host,
# {t} table, {n} a number. (description, content, paraphrase question)
GENERIC_TOPICS: list[tuple[str, str, str]] = [
    ("decision: {p} retry policy",
     "Agreed with {a} that {p} retries outbound calls with exponential backoff and full jitter, capped at {n} "
     "attempts; POSTs need idempotency keys.",
     "how many times does {p} try again when a call to another service fails"),
    ("runbook: failing over {p}'s database",
     "Promote the replica with pg_ctl promote on the standby, flip the DNS record for {h}, then restart {p} pods "
     "so connection pools reconnect. {b} owns the post-mortem.",
     "what are the steps if the primary postgres for {p} dies"),
    ("decision: {p} log retention",
     "{p} keeps application logs for {n} days in the hot tier and 13 months in cold storage; access logs are "
     "sampled at 10%.",
     "how long do we hold on to {p}'s logs"),
    ("meeting notes: {p} incident review",
     "Root cause was an unbounded query on {t} during peak; action items: add a statement timeout ({a}), add an "
     "index on created_at ({b}), alert on p99 latency.",
     "what did we learn from the {p} outage and who fixes what"),
    ("decision: {p} feature flags",
     "Flags for {p} live in the config service with an owner and an expiry date; stale flags older than {n} days "
     "fail the lint job.",
     "how do we keep toggles in {p} from piling up"),
    ("runbook: rotating {p} TLS certificates",
     "Issue the new cert from the internal CA, update the secret in namespace {ns}, roll the deployment, verify "
     "with openssl s_client against {h}.",
     "how to renew the https certs for {p}"),
    ("decision: {p} API versioning",
     "{p} puts the major version in the URL path; breaking changes need a {n}-day deprecation notice to "
     "consumers and a changelog entry.",
     "how do we handle breaking changes to {p}'s endpoints"),
    ("meeting notes: {p} capacity planning",
     "Traffic grew 18% quarter over quarter; {a} proposes two more nodes for {p} before the peak, {b} will "
     "benchmark the new instance type first.",
     "are we adding machines for {p} before the busy season"),
    ("runbook: {p} slow query triage",
     "Enable pg_stat_statements on {h}, sort by total_exec_time, run EXPLAIN (ANALYZE, BUFFERS) on the top "
     "three and check for sequential scans on {t}.",
     "how do I figure out which database calls are making {p} sluggish"),
    ("decision: {p} on-call handover",
     "Handover for {p} happens Mondays at 10:00 in a 15-minute call; the outgoing engineer writes open issues "
     "into the handover doc. {a} moderates.",
     "when and how does the pager pass from one person to the next for {p}"),
    ("todo: {p} dependency upgrades",
     "Bump {p}'s pinned dependencies, rerun the integration suite on {h}, and ask {b} to review the lockfile "
     "diff before Friday.",
     "what needs doing to bring {p}'s third-party libraries up to date"),
    ("decision: {p} database migrations",
     "Migrations for {p} must be backwards compatible for one release: add columns nullable, backfill in "
     "batches of {n}, drop the old column in the next release.",
     "how do we change {p}'s tables without downtime"),
    ("runbook: {p} cache stampede",
     "When the cache on {h} is flushed, enable request coalescing in {p} and warm the top keys from {t} before "
     "opening traffic.",
     "what to do when everything misses the cache at once in {p}"),
    ("meeting notes: {p} roadmap sync",
     "Next quarter for {p}: finish the {q} integration, cut p95 latency by a third, retire the legacy admin "
     "screens. {b} to share the draft with stakeholders.",
     "what are the priorities for {p} next quarter"),
]  # fmt: skip

# Unanswerable in-domain topics nobody stored: markers must not appear in any user's memories.
ABSENT_TOPICS: list[tuple[str, list[str]]] = [
    ("what is the kafka consumer lag alert threshold", ["kafka"]),
    ("how do we reallocate elasticsearch shards after a node loss", ["elasticsearch"]),
    ("graphql schema stitching decision for the gateway", ["graphql"]),
    ("oauth client secret rotation schedule", ["oauth"]),
    ("airflow DAG schedule for the nightly export", ["airflow"]),
    ("vault unseal keys custodians", ["vault", "unseal"]),
    ("cassandra compaction strategy we picked", ["cassandra"]),
    ("snowflake warehouse sizing for analytics", ["snowflake"]),
    ("which mobile app store review notes did we get", ["app store"]),
    ("rabbitmq queue mirroring policy", ["rabbitmq"]),
    ("salesforce sync field mapping", ["salesforce"]),
    ("mongodb replica set election timeout", ["mongodb"]),
]

OFF_TOPIC: list[str] = [
    "best hiking trails near lake como in october",
    "how many grams of flour in a cup",
    "who won the 1998 world cup final",
    "recipe for a sourdough starter with rye",
    "translate good morning into finnish",
    "what is the capital of mongolia",
    "how to repot a fiddle leaf fig",
    "average lifespan of a house cat",
    "cheap flights to lisbon in spring",
    "how do tides work",
]
