// hutch offload and bring-back against real git repositories and real
// process boxes: each bring-back case, the staged/unstaged split, secrets held
// back, a hostile box, and the refusals.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { expectOnlySteps, git as g, type Home, makeHome, newRepo, scratchDir } from "../helpers.ts";

let h: Home;
let work: string;
beforeAll(() => {
  h = makeHome();
  work = scratchDir("hutch-offload-");
});
afterAll(async () => {
  await h.cleanup();
  rmSync(work, { recursive: true, force: true });
});

let n = 0;
/** A repository with three committed files, then a staged change, an unstaged one on top, an untracked file and two secrets. */
function repo(): string {
  const files = Object.fromEntries(["a.txt", "b.txt", "c.txt"].map((f) => [f, `${f} line 1\n`]));
  const dir = newRepo(join(work, `repo${++n}`), { ...files, ".gitignore": "build/\n" });
  writeFileSync(join(dir, "a.txt"), "a.txt line 1\nstaged\n");
  g(dir, "add", "a.txt");
  writeFileSync(join(dir, "a.txt"), "a.txt line 1\nstaged\nunstaged\n");
  writeFileSync(join(dir, "notes.md"), "untracked\n");
  mkdirSync(join(dir, "build"));
  writeFileSync(join(dir, "build/out.o"), "ignored\n");
  writeFileSync(join(dir, ".env"), "API_TOKEN=sekrit-env-value\n");
  mkdirSync(join(dir, "keys"));
  writeFileSync(join(dir, "keys/id_ed25519"), "-----BEGIN OPENSSH PRIVATE KEY----- sekrit-key-value\n");
  return dir;
}

/** What the user would see: HEAD, the index as a tree, the status and every file's content. */
function state(dir: string) {
  const files: Record<string, string> = {};
  const walk = (rel: string) => {
    for (const e of readdirSync(join(dir, rel), { withFileTypes: true })) {
      const p = rel ? `${rel}/${e.name}` : e.name;
      if (p === ".git") continue;
      if (e.isDirectory()) walk(p);
      else files[p] = readFileSync(join(dir, p), "utf8");
    }
  };
  walk("");
  return { head: g(dir, "rev-parse", "HEAD"), index: g(dir, "write-tree"), status: g(dir, "status", "--porcelain"), files };
}

async function offload(dir: string, box: string) {
  const r = await h.run(["offload", "--box", box, "--json"], { cwd: dir });
  expectOnlySteps(r.stderr);
  expect(r.code).toBe(0);
  return JSON.parse(r.stdout) as { guestDir: string; heldBack: { path: string }[] };
}

async function inBox(box: string, dir: string, script: string, quiet = true) {
  const r = await h.run(["exec", box, "-w", dir, "--", "sh", "-c", script]);
  if (quiet) expect(r.stderr).toBe("");
  expect(r.code).toBe(0);
  return r.stdout;
}

async function bringBack(dir: string, box: string) {
  const r = await h.run(["bring-back", box, "--json"], { cwd: dir });
  return { ...r, json: r.code === 0 ? (JSON.parse(r.stdout) as Record<string, unknown>) : null };
}

describe("hutch offload", () => {
  test("outside a git work tree it refuses and says what to do", async () => {
    const r = await h.run(["offload", "--dry-run"], { cwd: work });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("is not inside a git work tree");
  });

  test("--dry-run lists what goes and what is held back, and changes nothing", async () => {
    const dir = repo();
    const before = state(dir);
    const r = await h.run(["offload", "--dry-run"], { cwd: dir });
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("notes.md");
    expect(r.stdout).not.toContain("build/out.o");
    expect(r.stdout).toContain("held back: .env");
    expect(r.stdout).toContain("held back: keys/id_ed25519");
    expect(r.stdout).toContain("--include .env");
    expect(state(dir)).toEqual(before);
    const list = await h.run(["box", "list", "--json"]);
    expect(JSON.parse(list.stdout)).toEqual([]);
    const deliberate = JSON.parse((await h.run(["offload", "--dry-run", "--json", "--include", ".env"], { cwd: dir })).stdout) as {
      files: { path: string }[];
      heldBack: { path: string }[];
    };
    expect(deliberate.files.map((f) => f.path)).toContain(".env");
    expect(deliberate.heldBack.map((f) => f.path)).toEqual(["keys/id_ed25519"]);
  });

  test("submodules and LFS are explained", async () => {
    const dir = repo();
    writeFileSync(join(dir, ".gitattributes"), "*.bin filter=lfs diff=lfs merge=lfs -text\n");
    g(dir, "update-index", "--add", "--cacheinfo", `160000,${g(dir, "rev-parse", "HEAD").trim()},vendor/lib`);
    const r = await h.run(["offload", "--dry-run", "--json"], { cwd: dir });
    expect(r.code).toBe(0);
    const notes = (JSON.parse(r.stdout) as { notes: string[] }).notes.join("\n");
    expect(notes).toContain("submodule vendor/lib: its commit is recorded, its work tree and history are not carried");
    expect(notes).toContain("the LFS store is not carried");
  });
});

describe("offload and bring back", () => {
  test("fast-forward: the box's commit, index and files come home, the staged/unstaged split with them", async () => {
    const dir = repo();
    const off = await offload(dir, "ff");
    expect(off.heldBack.map((x) => x.path).sort()).toEqual([".env", "keys/id_ed25519"]);
    // The split arrived, and the secrets did not (searched for by content and by name).
    expect(await inBox("ff", off.guestDir, "git status --porcelain")).toBe("MM a.txt\n?? notes.md\n");
    expect(await inBox("ff", off.guestDir, "git diff --cached --stat | tail -1")).toContain("1 insertion");
    expect(await inBox("ff", "/workspace", "grep -rl sekrit . || true; find / -xdev -name id_ed25519 -o -name .env 2>/dev/null")).toBe("");
    await inBox(
      "ff",
      off.guestDir,
      "echo box > b.txt && git add b.txt && git commit -qm 'box: b' && echo staged-in-box >> c.txt && git add c.txt && echo unstaged-in-box >> c.txt && echo fresh > new.txt",
    );
    const r = await bringBack(dir, "ff");
    expectOnlySteps(r.stderr);
    expect(r.json?.case).toBe("fast-forward");
    expect(((r.json?.commits ?? []) as { subject: string }[]).map((c) => c.subject)).toEqual(["box: b"]);
    expect(g(dir, "log", "-1", "--format=%s")).toBe("box: b\n");
    // The box commit took the staged a.txt along: only its unstaged line is left.
    expect(g(dir, "status", "--porcelain")).toBe(" M a.txt\nMM c.txt\n?? .env\n?? keys/\n?? new.txt\n?? notes.md\n");
    expect(g(dir, "show", ":c.txt")).toBe("c.txt line 1\nstaged-in-box\n");
    expect(readFileSync(join(dir, "c.txt"), "utf8")).toBe("c.txt line 1\nstaged-in-box\nunstaged-in-box\n");
    expect(readFileSync(join(dir, ".env"), "utf8")).toContain("sekrit-env-value");
    expect(g(dir, "rev-parse", "refs/hutch/ff/head").trim()).toBe(g(dir, "rev-parse", "HEAD").trim());
  });

  test("local commits meanwhile that touch other files: merged into the work tree, uncommitted, HEAD unchanged", async () => {
    const dir = repo();
    const off = await offload(dir, "mg");
    writeFileSync(join(dir, "c.txt"), "c.txt changed locally\n");
    g(dir, "commit", "-qm", "local", "c.txt");
    const head = g(dir, "rev-parse", "HEAD");
    const index = g(dir, "write-tree");
    await inBox("mg", off.guestDir, "echo box >> b.txt && git commit -qam 'box: b' && echo box2 > more.txt");
    const r = await bringBack(dir, "mg");
    expect(r.json?.case).toBe("merge");
    expect(g(dir, "rev-parse", "HEAD")).toBe(head);
    expect(g(dir, "write-tree")).toBe(index);
    expect(readFileSync(join(dir, "b.txt"), "utf8")).toBe("b.txt line 1\nbox\n");
    expect(readFileSync(join(dir, "more.txt"), "utf8")).toBe("box2\n");
    expect(readFileSync(join(dir, "c.txt"), "utf8")).toBe("c.txt changed locally\n");
    // The box committed the staged a.txt and its unstaged line: the local copy is the same, untouched.
    expect(readFileSync(join(dir, "a.txt"), "utf8")).toBe("a.txt line 1\nstaged\nunstaged\n");
  });

  test("a conflicting change: a branch, the work tree and index untouched, the message names the branch", async () => {
    const dir = repo();
    const off = await offload(dir, "cf");
    writeFileSync(join(dir, "b.txt"), "mine\n");
    await inBox("cf", off.guestDir, "echo theirs > b.txt && git commit -qam 'box: b'");
    const before = state(dir);
    const dry = await h.run(["bring-back", "cf", "--dry-run"], { cwd: dir });
    expect(dry.stdout).toStartWith("would be: kept apart on a branch");
    expect(state(dir)).toEqual(before);
    expect(g(dir, "branch", "--list", "hutch/*")).toBe("");
    const r = await h.run(["bring-back", "cf"], { cwd: dir });
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("kept apart on a branch: both you and the box changed b.txt");
    expect(r.stdout).toContain("hutch/cf");
    expect(r.stdout).toContain("git merge hutch/cf");
    expect(state(dir)).toEqual(before);
    expect(g(dir, "show", "hutch/cf:b.txt")).toBe("theirs\n");
  });

  test("a branch deleted meanwhile: the branch case, explained", async () => {
    const dir = repo();
    const off = await offload(dir, "bd");
    g(dir, "switch", "-q", "-c", "other");
    g(dir, "branch", "-q", "-D", "main");
    await inBox("bd", off.guestDir, "echo box >> b.txt");
    const r = await bringBack(dir, "bd");
    expect(r.json?.case).toBe("branch");
    expect(r.json?.reason).toContain("no longer on main");
    expect(g(dir, "show", "hutch/bd:b.txt")).toBe("b.txt line 1\nbox\n");
  });

  test("a branch rebased meanwhile, and a detached HEAD: the branch case, explained, nothing touched", async () => {
    const dir = repo();
    const off = await offload(dir, "rb");
    g(dir, "commit", "-q", "--amend", "--only", "-m", "start, reworded");
    await inBox("rb", off.guestDir, "echo box >> b.txt");
    const before = state(dir);
    const r = await bringBack(dir, "rb");
    expect(r.json?.case).toBe("branch");
    expect(r.json?.reason).toContain("main was rewritten since offload");
    expect(state(dir)).toEqual(before);
    g(dir, "switch", "-q", "--detach");
    const detached = await bringBack(dir, "rb");
    expect(detached.json?.case).toBe("branch");
    expect(detached.json?.reason).toContain("no longer on main");
  });

  test("a box that writes a held-back name never overwrites the local secret", async () => {
    const dir = repo();
    const off = await offload(dir, "sec");
    await inBox("sec", off.guestDir, "echo API_TOKEN=from-the-box > .env && echo box >> b.txt");
    const before = state(dir);
    const r = await bringBack(dir, "sec");
    expect(r.json?.case).toBe("branch");
    expect(state(dir)).toEqual(before);
    expect(readFileSync(join(dir, ".env"), "utf8")).toBe("API_TOKEN=sekrit-env-value\n");
  });

  test("nothing to bring back: says so and changes nothing", async () => {
    const dir = repo();
    await offload(dir, "nb");
    // A stopped box is started for the bring-back; /workspace survives the stop.
    expect((await h.run(["box", "stop", "nb"])).code).toBe(0);
    const before = state(dir);
    const refs = g(dir, "for-each-ref");
    const r = await h.run(["bring-back", "nb"], { cwd: dir });
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("nothing to bring back");
    expect(state(dir)).toEqual(before);
    expect(g(dir, "for-each-ref")).toBe(refs);
  });

  test("a hostile box: hooks, config, attributes and drivers never run on the host", async () => {
    const dir = repo();
    const marks = scratchDir("hutch-marks-");
    const off = await offload(dir, "evil");
    writeFileSync(join(dir, "c.txt"), "c.txt changed locally\n");
    g(dir, "commit", "-qm", "local", "c.txt");
    const cmd = (what: string) => `touch ${marks}/${what}`;
    await inBox(
      "evil",
      off.guestDir,
      [
        "mkdir -p .git/hooks evilhooks",
        ...["post-checkout", "post-merge", "reference-transaction", "pre-commit", "post-index-change"].flatMap((hk) => [
          `printf '#!/bin/sh\\n${cmd(`hook-${hk}`)}\\n' > .git/hooks/${hk}`,
          `cp .git/hooks/${hk} evilhooks/${hk}`,
        ]),
        "chmod +x .git/hooks/* evilhooks/*",
        `git config core.hooksPath "$PWD/evilhooks"`,
        `git config core.fsmonitor '${cmd("fsmonitor")}'`,
        `git config core.sshCommand '${cmd("ssh")}'`,
        `git config diff.external '${cmd("diff-external")}'`,
        `git config filter.evil.smudge '${cmd("smudge")}; cat'`,
        `git config filter.evil.clean '${cmd("clean")}; cat'`,
        `git config merge.evil.driver '${cmd("merge-driver")}'`,
        `git config diff.evil.textconv '${cmd("textconv")}'`,
        "printf '* filter=evil diff=evil merge=evil\\n' > .gitattributes",
        "echo box >> b.txt",
        "git -c core.hooksPath=/dev/null -c core.fsmonitor=false add -A",
        "git -c core.hooksPath=/dev/null -c core.fsmonitor=false -c filter.evil.clean=cat commit -qm 'box: evil'",
        "mkdir -p .git/info && printf '* filter=evil\\n' > .git/info/attributes",
      ].join(" && "),
      false,
    );
    // Drivers the user's own config defines under the names the box's .gitattributes asks for: a git checkout
    // or merge of the box's tree would run them; hutch writes the files itself.
    const userDrivers = ["filter.evil.smudge", "filter.evil.clean", "filter.evil.process", "merge.evil.driver", "diff.evil.textconv"];
    for (const k of userDrivers) g(dir, "config", k, `${cmd(`user-${k}`)}; cat`);
    const r = await bringBack(dir, "evil");
    expectOnlySteps(r.stderr);
    expect(r.json?.case).toBe("merge");
    expect(readdirSync(marks)).toEqual([]);
    expect(readFileSync(join(dir, "b.txt"), "utf8")).toBe("b.txt line 1\nbox\n");
    expect(readFileSync(join(dir, ".gitattributes"), "utf8")).toBe("* filter=evil diff=evil merge=evil\n");
    expect(existsSync(join(dir, "evilhooks"))).toBe(true);
    // Again, now that the box's .gitattributes is in the work tree hutch reads: still nothing runs.
    await inBox("evil", off.guestDir, "echo again >> b.txt", false);
    const again = await bringBack(dir, "evil");
    expect(again.json?.reason ?? "").toBe("");
    expect(again.json?.case).toBe("merge");
    expect(readFileSync(join(dir, "b.txt"), "utf8")).toBe("b.txt line 1\nbox\nagain\n");
    expect(readdirSync(marks)).toEqual([]);
    // The user's git afterwards still runs none of the box's: its config never came home.
    for (const k of userDrivers) g(dir, "config", "--unset", k);
    g(dir, "status");
    g(dir, "diff", "HEAD");
    expect(readdirSync(marks)).toEqual([]);
    expect(Bun.spawnSync(["git", "config", "--get", "core.hooksPath"], { cwd: dir }).exitCode).toBe(1);
  }, 60_000);

  test("a deleted box: bring-back says so, and what was offloaded stays in its refs", async () => {
    const dir = repo();
    await offload(dir, "gone");
    expect((await h.run(["box", "delete", "gone"])).code).toBe(0);
    const r = await h.run(["bring-back", "gone"], { cwd: dir });
    expect(r.code).toBe(4);
    expect(r.stderr).toContain("box gone is gone");
    expect(g(dir, "rev-parse", "--verify", "refs/hutch/gone/offload/work").trim()).toMatch(/^[0-9a-f]{40}$/);
    const none = await h.run(["bring-back", "never", "--json"], { cwd: dir });
    expect(none.code).toBe(4);
    expect((JSON.parse(none.stdout) as { error: { message: string } }).error.message).toContain("no offload to box never");
  });

  test("a malformed object from the box is refused before any ref or file changes", async () => {
    const dir = repo();
    const off = await offload(dir, "bad");
    await inBox(
      "bad",
      off.guestDir,
      "echo box >> b.txt && git commit -qam box && c=$(printf 'tree %s\\nparent %s\\nauthor bad <no email\\ncommitter x <x@x> 0 +0000\\n\\nbad\\n' $(git rev-parse HEAD^{tree}) $(git rev-parse HEAD) | git hash-object -t commit -w --literally --stdin) && git reset -q --soft $c",
    );
    const before = state(dir);
    const r = await h.run(["bring-back", "bad"], { cwd: dir });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("refused the objects the box sent");
    expect(r.stderr).toContain("badEmail");
    expect(state(dir)).toEqual(before);
    expect(Bun.spawnSync(["git", "rev-parse", "-q", "--verify", "refs/hutch/bad/work"], { cwd: dir }).exitCode).toBe(1);
  });

  test("a symlink out of the repository: refused, nothing written, the work kept in quarantine", async () => {
    const dir = repo();
    const outside = scratchDir("hutch-outside-");
    const off = await offload(dir, "link");
    await inBox("link", off.guestDir, `ln -s ${outside} escape && ln -s ../../x rel-escape && echo box >> b.txt`);
    const before = state(dir);
    const r = await h.run(["bring-back", "link"], { cwd: dir });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/refused what the box sent: the symlink (rel-)?escape points/);
    expect(r.stderr).toContain("refs/hutch/link/");
    expect(state(dir)).toEqual(before);
    expect(readdirSync(outside)).toEqual([]);
    expect(g(dir, "rev-parse", "--verify", "refs/hutch/link/work").trim()).toMatch(/^[0-9a-f]{40}$/);
  });

  test("chained symlinks that each look harmless but together leave the repository: refused, naming the link, nothing written", async () => {
    const dir = repo();
    const off = await offload(dir, "chain");
    await inBox("chain", off.guestDir, "ln -s . d && ln -s d/.. e && ln -s e/.. f && ln -s f/etc/shadow shadowlink && echo box >> b.txt");
    const before = state(dir);
    const r = await h.run(["bring-back", "chain"], { cwd: dir });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("refused what the box sent: the symlink e points outside the repository (d/.., through the symlink d)");
    expect(r.stderr).toContain("refs/hutch/chain/");
    expect(state(dir)).toEqual(before);
    for (const l of ["d", "e", "f", "shadowlink"]) expect(lstatSync(join(dir, l), { throwIfNoEntry: false })).toBeUndefined();
  });
});

describe("a second offload", () => {
  type Sent = { objects: number; blobs: number; bytes: number };
  type Off = { guestDir: string; updated: boolean; upToDate: boolean; sent: Sent };
  const again = async (dir: string, box: string) => {
    const r = await h.run(["offload", "--box", box, "--json"], { cwd: dir });
    return { ...r, json: r.code === 0 ? (JSON.parse(r.stdout) as Off) : null };
  };

  test("after a one-file change sends that file's content only, and the box's copy is updated whole", async () => {
    const dir = repo();
    // Forty incompressible files of 32 KiB: the tree is 1.3 MB, one file is 32 KiB.
    for (let i = 0; i < 40; i++) writeFileSync(join(dir, `d${i}.bin`), crypto.getRandomValues(new Uint8Array(32 * 1024)));
    g(dir, "add", "d*.bin");
    g(dir, "commit", "-qm", "data", "--", "d*.bin");
    const r1 = await h.run(["offload", "--box", "inc", "--json"], { cwd: dir });
    expect(r1.code).toBe(0);
    const first = JSON.parse(r1.stdout) as Off;
    expect(first.updated).toBe(false);
    expect(first.sent.blobs).toBeGreaterThanOrEqual(44);
    expect(first.sent.bytes).toBeGreaterThan(40 * 32 * 1024);
    // Output the box built (ignored here too) is kept across the update.
    await inBox("inc", first.guestDir, "mkdir -p build && echo built-in-box > build/cache.o");

    const changed = crypto.getRandomValues(new Uint8Array(24 * 1024));
    writeFileSync(join(dir, "d7.bin"), changed);
    const second = await again(dir, "inc");
    expectOnlySteps(second.stderr);
    expect(second.json).toMatchObject({ updated: true, upToDate: false, guestDir: first.guestDir });
    // d7.bin's blob, the work tree's root tree and the work-tree commit. The base, the index tree and the index commit
    // (hutch dates its commits as the base, so the same index is the same commit) are in the box.
    expect(second.json?.sent).toMatchObject({ objects: 3, blobs: 1 });
    expect(second.json!.sent.bytes).toBeGreaterThan(changed.length);
    expect(second.json!.sent.bytes).toBeLessThan(changed.length + 4096);
    expect(await inBox("inc", first.guestDir, "git hash-object d7.bin")).toBe(g(dir, "hash-object", "d7.bin"));
    expect(await inBox("inc", first.guestDir, "git status --porcelain")).toBe("MM a.txt\n M d7.bin\n?? notes.md\n");
    expect(await inBox("inc", first.guestDir, "cat build/cache.o")).toBe("built-in-box\n");
    expect(await inBox("inc", "/workspace", "ls -A")).toBe(`${first.guestDir.slice("/workspace/".length)}\n`);
    const human = await h.run(["offload", "--box", "inc"], { cwd: dir });
    expect(human.stdout).toContain("already holds the work tree as it is: nothing sent");

    // A commit and a staged change locally: the box follows (its HEAD, its index), still only what it lacks.
    g(dir, "commit", "-qm", "local", "a.txt");
    writeFileSync(join(dir, "c.txt"), "c staged\n");
    g(dir, "add", "c.txt");
    const third = await again(dir, "inc");
    // c.txt's staged content is the one blob the box lacks (a.txt's was in the box's work tree already).
    expect(third.json?.sent.blobs).toBe(1);
    expect(await inBox("inc", first.guestDir, "git log -1 --format=%s")).toBe("local\n");
    expect(await inBox("inc", first.guestDir, "git status --porcelain")).toBe("M  c.txt\n M d7.bin\n?? notes.md\n");
    // The work comes home as after one offload.
    await inBox("inc", first.guestDir, "echo box >> b.txt && git commit -qam 'box: b'");
    const back = await bringBack(dir, "inc");
    expect(back.json?.case).toBe("fast-forward");
    expect(g(dir, "log", "-2", "--format=%s")).toBe("box: b\nlocal\n");
  }, 120_000);

  test("after a local branch switch the box follows onto that branch, and the work comes home there", async () => {
    const dir = repo();
    const off = await offload(dir, "sw");
    g(dir, "switch", "-q", "-c", "feature");
    g(dir, "commit", "-qm", "on feature", "a.txt");
    const r = await again(dir, "sw");
    expectOnlySteps(r.stderr);
    expect(r.json?.updated).toBe(true);
    expect(await inBox("sw", off.guestDir, "git rev-parse --abbrev-ref HEAD; git log -1 --format=%s; git branch --list main")).toBe(
      "feature\non feature\n  main\n",
    );
    await inBox("sw", off.guestDir, "echo box >> b.txt && git commit -qam 'box: feature'");
    const back = await bringBack(dir, "sw");
    expect(back.json?.case).toBe("fast-forward");
    expect(g(dir, "log", "-1", "--format=%s", "feature")).toBe("box: feature\n");
  }, 60_000);

  test("refused while the box has work not brought back; allowed once it is home, even on a branch", async () => {
    const dir = repo();
    const off = await offload(dir, "own");
    await inBox("own", off.guestDir, "echo theirs > c.txt");
    writeFileSync(join(dir, "b.txt"), "local\n");
    const before = state(dir);
    const refused = await h.run(["offload", "--box", "own"], { cwd: dir });
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain("box own has work of its own");
    expect(refused.stderr).toContain("hutch bring-back own");
    expect(state(dir)).toEqual(before);
    expect(await inBox("own", off.guestDir, "cat c.txt")).toBe("theirs\n");
    // A commit in the box is its own work too.
    await inBox("own", off.guestDir, "git commit -qam 'box: c'");
    expect((await h.run(["offload", "--box", "own"], { cwd: dir })).code).toBe(1);
    // Brought home onto a branch (the user changed c.txt too): the box's work is at home, so an offload may replace it.
    writeFileSync(join(dir, "c.txt"), "mine\n");
    const back = await bringBack(dir, "own");
    expect(back.json?.case).toBe("branch");
    const next = await again(dir, "own");
    expectOnlySteps(next.stderr);
    expect(next.json?.updated).toBe(true);
    expect(await inBox("own", off.guestDir, "cat c.txt b.txt")).toBe("mine\nlocal\n");
    expect(await inBox("own", off.guestDir, "git log -1 --format=%s")).toBe("start\n");
  }, 60_000);
});

describe("ignored output on request", () => {
  function withOutput(): string {
    const dir = repo();
    writeFileSync(join(dir, ".gitignore"), "build/\nnode_modules/\n");
    g(dir, "commit", "-qm", "ignore node_modules", "--", ".gitignore");
    mkdirSync(join(dir, "node_modules/.cache"), { recursive: true });
    mkdirSync(join(dir, "node_modules/pkg"), { recursive: true });
    writeFileSync(join(dir, "node_modules/.cache/x.json"), '{"cached":true}\n');
    writeFileSync(join(dir, "node_modules/pkg/index.js"), "module.exports = 1;\n");
    writeFileSync(join(dir, "build/.env"), "BUILD_TOKEN=sekrit-build-value\n");
    // Ignored only by this clone's own exclude file, which does not travel.
    writeFileSync(join(dir, ".git/info/exclude"), "local.log\n");
    writeFileSync(join(dir, "local.log"), "log line\n");
    return dir;
  }

  test("--dry-run lists the ignored files asked for, still past the deny list", async () => {
    const dir = withOutput();
    const before = state(dir);
    const args = ["offload", "--dry-run", "--include-ignored", "build", "--include-ignored", "node_modules/.cache"];
    const r = await h.run([...args, "--json"], { cwd: dir });
    expect(r.code).toBe(0);
    const plan = JSON.parse(r.stdout) as { ignored: { path: string }[]; heldBack: { path: string }[]; files: { path: string }[] };
    expect(plan.ignored.map((f) => f.path).sort()).toEqual(["build/out.o", "node_modules/.cache/x.json"]);
    expect(plan.heldBack.map((f) => f.path)).toContain("build/.env");
    expect(plan.files.map((f) => f.path)).not.toContain("build/out.o");
    const human = await h.run(args, { cwd: dir });
    expect(human.stdout).toContain("build/out.o (8 bytes, git-ignored, carried on request)");
    expect(human.stdout).toContain("held back: build/.env");
    expect(human.stdout).not.toContain("node_modules/pkg");
    const none = JSON.parse((await h.run(["offload", "--dry-run", "--json"], { cwd: dir })).stdout) as { ignored: unknown[] };
    expect(none.ignored).toEqual([]);
    expect(state(dir)).toEqual(before);
  });

  test("carried into the box's work tree, not its index, and still ignored there; a bring-back sees no change; an update re-sends only what changed", async () => {
    const dir = withOutput();
    g(dir, "config", "--add", "hutch.includeIgnored", "build/");
    g(dir, "config", "--add", "hutch.includeIgnored", "local.log");
    const r = await h.run(["offload", "--box", "ign", "--json", "--include-ignored", "node_modules/.cache"], { cwd: dir });
    expectOnlySteps(r.stderr);
    expect(r.code).toBe(0);
    const off = JSON.parse(r.stdout) as { guestDir: string; ignored: { path: string }[] };
    expect(off.ignored.map((f) => f.path).sort()).toEqual(["build/out.o", "local.log", "node_modules/.cache/x.json"]);
    expect(await inBox("ign", off.guestDir, "cat build/out.o node_modules/.cache/x.json local.log")).toBe(
      'ignored\n{"cached":true}\nlog line\n',
    );
    expect(await inBox("ign", off.guestDir, "ls -A node_modules; ls -A build")).toBe(".cache\nout.o\n");
    expect(await inBox("ign", "/workspace", "grep -rl sekrit . || true")).toBe("");
    // Not in the index, and git in the box ignores them (local.log through the box's info/exclude).
    expect(await inBox("ign", off.guestDir, "git status --porcelain")).toBe("MM a.txt\n?? notes.md\n");
    expect(await inBox("ign", off.guestDir, "git ls-files build local.log node_modules")).toBe("");
    const back = await h.run(["bring-back", "ign"], { cwd: dir });
    expect(back.stdout).toContain("nothing to bring back");

    writeFileSync(join(dir, "build/out.o"), "rebuilt here\n");
    const upd = await h.run(["offload", "--box", "ign", "--json", "--include-ignored", "node_modules/.cache"], { cwd: dir });
    expect(upd.code, upd.stderr + upd.stdout).toBe(0);
    expect(JSON.parse(upd.stdout)).toMatchObject({ updated: true, sent: { blobs: 1 } });
    expect(await inBox("ign", off.guestDir, "cat build/out.o")).toBe("rebuilt here\n");
    expect(await inBox("ign", off.guestDir, "git status --porcelain")).toBe("MM a.txt\n?? notes.md\n");
    const same = await h.run(["offload", "--box", "ign", "--json", "--include-ignored", "node_modules/.cache"], { cwd: dir });
    expect(JSON.parse(same.stdout)).toMatchObject({ upToDate: true });
  }, 60_000);
});

/** Starts hutch in dir and SIGKILLs it as soon as its stderr shows `when`. */
async function killAt(dir: string, args: string[], when: string): Promise<boolean> {
  const proc = Bun.spawn([join(import.meta.dir, "../../dist/hutch"), ...args], { cwd: dir, env: h.env, stdout: "pipe", stderr: "pipe" });
  let seen = "";
  const dec = new TextDecoder();
  for await (const chunk of proc.stderr as ReadableStream<Uint8Array>) {
    seen += dec.decode(chunk);
    if (seen.includes(when)) {
      proc.kill("SIGKILL");
      break;
    }
  }
  await proc.exited;
  return proc.signalCode === "SIGKILL";
}

describe("interrupted", () => {
  test("an offload killed while sending: the box never holds a copy that looks complete, and a rerun finishes it", async () => {
    const dir = repo();
    expect(await killAt(dir, ["offload", "--box", "kill"], "sending to box")).toBe(true);
    const record = JSON.parse(readFileSync(join(dir, ".git/hutch/kill.json"), "utf8")) as { state: string; guestDir: string };
    expect(record.state).toBe("sending");
    // Either nothing is in place, or what is in place is complete (it is renamed in last).
    const seen = await inBox(
      "kill",
      "/workspace",
      `[ -e ${record.guestDir} ] && git -C ${record.guestDir} status --porcelain || echo absent`,
    );
    expect(["absent\n", "MM a.txt\n?? notes.md\n"]).toContain(seen);
    const before = state(dir);
    const again = await h.run(["offload", "--box", "kill"], { cwd: dir });
    expect(again.code).toBe(0);
    expect(again.stdout).toMatch(/^(offloaded|finished the offload of) 5 files/);
    expect(await inBox("kill", record.guestDir, "git status --porcelain")).toBe("MM a.txt\n?? notes.md\n");
    expect(await inBox("kill", "/workspace", "ls -A")).toBe(`${record.guestDir.slice("/workspace/".length)}\n`);
    expect(state(dir)).toEqual(before);
  });

  test("the daemon killed during an offload and during a bring-back: the reruns complete, no local edit lost", async () => {
    const dir = repo();
    const box = "kd";
    expect((await h.run(["box", "create", box, "--start"])).code).toBe(0);
    const killDaemonAt = async (args: string[], when: string) => {
      const proc = Bun.spawn([join(import.meta.dir, "../../dist/hutch"), ...args], {
        cwd: dir,
        env: h.env,
        stdout: "pipe",
        stderr: "pipe",
      });
      let seen = "";
      for await (const chunk of proc.stderr as ReadableStream<Uint8Array>) {
        seen += new TextDecoder().decode(chunk);
        if (seen.includes(when)) {
          process.kill(h.daemonPid()!, "SIGKILL");
          break;
        }
      }
      return proc.exited;
    };
    await killDaemonAt(["offload", "--box", box], "sending to box");
    const off = await h.run(["offload", "--box", box, "--json"], { cwd: dir });
    expectOnlySteps(off.stderr);
    expect(off.code).toBe(0);
    const guest = (JSON.parse(off.stdout) as { guestDir: string }).guestDir;
    expect(await inBox(box, guest, "git status --porcelain")).toBe("MM a.txt\n?? notes.md\n");
    await inBox(box, guest, "echo box >> b.txt");
    // The killed run's CLI may finish the work itself on the daemon it starts again (it asks again for a stream
    // that failed before anything ran): then the rerun has nothing left to bring; either way the work comes home.
    const killed = await killDaemonAt(["bring-back", box], "fetching the box's work");
    const back = await bringBack(dir, box);
    expectOnlySteps(back.stderr);
    expect(back.json?.case).toBe(killed === 0 ? "nothing" : "fast-forward");
    expect(readFileSync(join(dir, "b.txt"), "utf8")).toBe("b.txt line 1\nbox\n");
    expect(readFileSync(join(dir, "a.txt"), "utf8")).toBe("a.txt line 1\nstaged\nunstaged\n");
    expect(g(dir, "status", "--porcelain")).toBe("MM a.txt\n M b.txt\n?? .env\n?? keys/\n?? notes.md\n");
  }, 60_000);

  test("an offload whose record was not marked done: the rerun sees the box's complete copy and finishes", async () => {
    const dir = repo();
    await offload(dir, "redo");
    const p = join(dir, ".git/hutch/redo.json");
    writeFileSync(p, readFileSync(p, "utf8").replace('"state": "done"', '"state": "sending"'));
    const again = await h.run(["offload", "--box", "redo", "--json"], { cwd: dir });
    expect(again.code).toBe(0);
    expect((JSON.parse(again.stdout) as { resumed: boolean }).resumed).toBe(true);
    // The box's copy is the work tree as it is: a second offload sends nothing; once the box has work of its own, it refuses.
    const twice = await h.run(["offload", "--box", "redo", "--json"], { cwd: dir });
    expect(twice.code).toBe(0);
    expect(JSON.parse(twice.stdout)).toMatchObject({ upToDate: true, sent: { objects: 0, bytes: 0 } });
    await inBox("redo", (JSON.parse(twice.stdout) as { guestDir: string }).guestDir, "echo box >> b.txt");
    const refused = await h.run(["offload", "--box", "redo"], { cwd: dir });
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain("hutch bring-back redo");
  });

  test("a second offload killed while sending and while swapping the copy in: the box holds the old copy or the new, and a rerun finishes", async () => {
    const dir = repo();
    const off = await offload(dir, "kupd");
    const oldStatus = "MM a.txt\n?? notes.md\n";
    const newStatus = "MM a.txt\n M b.txt\n?? notes.md\n";
    writeFileSync(join(dir, "b.txt"), "b.txt changed for the second offload\n");
    const seen = async () =>
      inBox("kupd", "/workspace", `[ -e ${off.guestDir} ] && git -C ${off.guestDir} status --porcelain || echo absent`);
    expect(await killAt(dir, ["offload", "--box", "kupd"], "objects (")).toBe(true);
    expect(await seen()).toBe(oldStatus);
    expect(await killAt(dir, ["offload", "--box", "kupd"], "updating box")).toBe(true);
    // Killed during the swap the box has the old copy or the new, each whole, or (between the two renames) none.
    const mid = await seen();
    expect([oldStatus, newStatus, "absent\n"]).toContain(mid);
    if (mid === newStatus) expect(await inBox("kupd", off.guestDir, "cat b.txt")).toBe("b.txt changed for the second offload\n");
    const before = state(dir);
    const again = await h.run(["offload", "--box", "kupd", "--json"], { cwd: dir });
    expectOnlySteps(again.stderr);
    expect(again.code).toBe(0);
    expect(JSON.parse(again.stdout)).toMatchObject({ updated: true });
    expect(await seen()).toBe(newStatus);
    expect(await inBox("kupd", off.guestDir, "cat b.txt")).toBe("b.txt changed for the second offload\n");
    expect(await inBox("kupd", "/workspace", "ls -A")).toBe(`${off.guestDir.slice("/workspace/".length)}\n`);
    expect(JSON.parse(readFileSync(join(dir, ".git/hutch/kupd.json"), "utf8"))).toMatchObject({ state: "done" });
    expect(state(dir)).toEqual(before);
  }, 60_000);

  test("a swap cut between its two renames: the rerun puts the complete copy in place, or the old one back", async () => {
    const dir = repo();
    const off = await offload(dir, "swap");
    const rec = (p = join(dir, ".git/hutch/swap.json")) => JSON.parse(readFileSync(p, "utf8")) as Record<string, unknown>;
    const first = rec();
    const from = {
      ...Object.fromEntries(["id", "base", "indexTree", "workTree"].map((k) => [k, first[k]])),
      work: g(dir, "rev-parse", "refs/hutch/swap/offload/work").trim(),
    };
    writeFileSync(join(dir, "b.txt"), "b.txt second\n");
    expect((await h.run(["offload", "--box", "swap"], { cwd: dir })).code).toBe(0);
    const second = rec();
    // The new copy staged and complete, the old one moved aside, the record not yet done.
    writeFileSync(join(dir, ".git/hutch/swap.json"), JSON.stringify({ ...second, state: "sending", from }));
    await inBox(
      "swap",
      "/workspace",
      `mv -T ${off.guestDir} /workspace/.hutch-stage-${second.id} && mkdir /workspace/.hutch-old-${second.id}`,
    );
    const resumed = await h.run(["offload", "--box", "swap", "--json"], { cwd: dir });
    expect(resumed.code).toBe(0);
    expect(JSON.parse(resumed.stdout)).toMatchObject({ updated: true, resumed: true });
    expect(await inBox("swap", off.guestDir, "cat b.txt")).toBe("b.txt second\n");
    expect(await inBox("swap", "/workspace", "ls -A")).toBe(`${off.guestDir.slice("/workspace/".length)}\n`);
    // Cut before the new copy was complete: the old copy (here the second) goes back in place and the update is redone.
    const pending = "off_pending00000000";
    writeFileSync(join(dir, "b.txt"), "b.txt third\n");
    const secondFrom = {
      ...Object.fromEntries(["id", "base", "indexTree", "workTree"].map((k) => [k, second[k]])),
      work: g(dir, "rev-parse", "refs/hutch/swap/offload/work").trim(),
    };
    writeFileSync(join(dir, ".git/hutch/swap.json"), JSON.stringify({ ...second, id: pending, state: "sending", from: secondFrom }));
    await inBox(
      "swap",
      "/workspace",
      `mv -T ${off.guestDir} /workspace/.hutch-old-${pending} && mkdir -p /workspace/.hutch-stage-${pending}/.git`,
    );
    const redone = await h.run(["offload", "--box", "swap", "--json"], { cwd: dir });
    expectOnlySteps(redone.stderr);
    expect(redone.code).toBe(0);
    expect(JSON.parse(redone.stdout)).toMatchObject({ updated: true, resumed: false, sent: { blobs: 1 } });
    expect(await inBox("swap", off.guestDir, "cat b.txt")).toBe("b.txt third\n");
    expect(await inBox("swap", "/workspace", "ls -A")).toBe(`${off.guestDir.slice("/workspace/".length)}\n`);
  }, 60_000);

  test("a bring-back killed midway: the rerun completes and no local edit is lost", async () => {
    const dir = repo();
    const off = await offload(dir, "kback");
    await inBox("kback", off.guestDir, "echo box >> b.txt && git commit -qam 'box: b' && echo more >> c.txt");
    expect(await killAt(dir, ["bring-back", "kback"], "fetching the box's work")).toBe(true);
    const r = await bringBack(dir, "kback");
    expectOnlySteps(r.stderr);
    expect(r.json?.case).toBe("fast-forward");
    expect(readFileSync(join(dir, "b.txt"), "utf8")).toBe("b.txt line 1\nbox\n");
    expect(readFileSync(join(dir, "a.txt"), "utf8")).toBe("a.txt line 1\nstaged\nunstaged\n");
    expect(readFileSync(join(dir, "c.txt"), "utf8")).toBe("c.txt line 1\nmore\n");
    expect(readFileSync(join(dir, ".env"), "utf8")).toContain("sekrit-env-value");
  });
});

describe("a real open-source repository with history", () => {
  // tests/fixtures/semver.bundle: node-semver's npm package sources (ISC), two releases as two commits.
  function clone(): string {
    const dir = join(work, `semver${++n}`);
    g(work, "clone", "-q", "-b", "main", join(import.meta.dir, "../fixtures/semver.bundle"), dir);
    g(dir, "config", "user.email", "dev@example.com");
    g(dir, "config", "user.name", "Dev");
    writeFileSync(join(dir, "index.js"), `${readFileSync(join(dir, "index.js"), "utf8")}// staged\n`);
    g(dir, "add", "index.js");
    writeFileSync(join(dir, "index.js"), `${readFileSync(join(dir, "index.js"), "utf8")}// unstaged\n`);
    writeFileSync(join(dir, "TODO.md"), "untracked\n");
    writeFileSync(join(dir, ".env.local"), "NPM_TOKEN=sekrit-npm\n");
    return dir;
  }

  test("offload carries the history and the split; the box's commit fast-forwards home", async () => {
    const dir = clone();
    const off = await offload(dir, "oss");
    expect(await inBox("oss", off.guestDir, "git log --format=%s")).toBe(
      "semver 7.8.6 (npm package source)\nsemver 5.7.3 (npm package source)\n",
    );
    expect(await inBox("oss", off.guestDir, "git status --porcelain")).toBe("MM index.js\n?? TODO.md\n");
    expect(await inBox("oss", off.guestDir, "grep -rl sekrit . || true")).toBe("");
    await inBox(
      "oss",
      off.guestDir,
      "echo '// box' >> functions/clean.js && git commit -qm 'box: clean' functions/clean.js && echo box >> README.md",
    );
    const r = await bringBack(dir, "oss");
    expect(r.json?.case).toBe("fast-forward");
    expect(g(dir, "log", "-1", "--format=%s")).toBe("box: clean\n");
    expect(g(dir, "status", "--porcelain")).toBe(" M README.md\nMM index.js\n?? .env.local\n?? TODO.md\n");
  });

  test("a local commit meanwhile is merged around; an overlapping one makes a branch", async () => {
    const dir = clone();
    const off = await offload(dir, "oss2");
    writeFileSync(join(dir, "range.bnf"), "local\n");
    g(dir, "commit", "-qm", "local: bnf", "range.bnf");
    await inBox("oss2", off.guestDir, "echo '// box' >> functions/clean.js && git commit -qm 'box: clean' functions/clean.js");
    const head = g(dir, "rev-parse", "HEAD");
    const merged = await bringBack(dir, "oss2");
    expect(merged.json?.case).toBe("merge");
    expect(g(dir, "rev-parse", "HEAD")).toBe(head);
    expect(readFileSync(join(dir, "functions/clean.js"), "utf8")).toEndWith("// box\n");
    await inBox("oss2", off.guestDir, "echo box > range.bnf && git commit -qm 'box: bnf' range.bnf");
    const before = state(dir);
    const branched = await bringBack(dir, "oss2");
    expect(branched.json?.case).toBe("branch");
    expect(branched.json?.created).toBe("hutch/oss2");
    expect(state(dir)).toEqual(before);
  });
});
