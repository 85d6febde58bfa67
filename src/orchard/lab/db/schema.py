"""lab.db's tables and the schema version they make.

A database whose recorded version differs is refused by `LabState`, never
migrated silently, so the version moves whenever these statements do.
"""

from __future__ import annotations

SCHEMA_VERSION = 1

SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE hypotheses (
    id TEXT PRIMARY KEY,
    data TEXT NOT NULL,            -- the hypothesis fields, JSON
    status TEXT NOT NULL,          -- open, running, landed, killed, iterated
    source TEXT NOT NULL,          -- user, opportunities, planner, iterate
    parent TEXT,                   -- the hypothesis an ITERATE sharpened
    attempts INTEGER NOT NULL DEFAULT 0,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL
);
CREATE TABLE experiments (
    name TEXT PRIMARY KEY,
    hypothesis TEXT NOT NULL REFERENCES hypotheses(id),
    worker TEXT NOT NULL,
    lane TEXT NOT NULL,
    loop INTEGER NOT NULL,
    status TEXT NOT NULL,          -- see Experiment.status
    target_base TEXT NOT NULL,
    bench_base TEXT NOT NULL,
    started_at REAL NOT NULL,
    finished_at REAL,
    candidate TEXT,                -- collected candidate, JSON
    judgment TEXT,                 -- the judge's findings and verdict, JSON
    decision TEXT,                 -- LAND, KILL, ITERATE
    reasons TEXT,                  -- JSON list
    branch TEXT,
    land_commit TEXT,
    merge_commit TEXT
);
CREATE TABLE events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    at REAL NOT NULL,
    kind TEXT NOT NULL,
    experiment TEXT,
    data TEXT NOT NULL
);
CREATE TABLE measurements (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    at REAL NOT NULL,
    kind TEXT NOT NULL,            -- baseline, candidate, main
    commit_id TEXT NOT NULL,
    experiment TEXT,
    metrics TEXT NOT NULL          -- {metric key: median}, JSON
);
CREATE TABLE baselines (
    commit_id TEXT PRIMARY KEY,
    binary TEXT NOT NULL,          -- the judge's build (records.build.BuiltBinary: path and hashes), JSON
    built_at REAL NOT NULL
);
"""
