/**
 * Run ownership: one writer per run (pid, host, heartbeat), refused second writers naming the
 * owner, and orphans (owner gone) turned `interrupted` by whichever process opens the workspace
 * next, while live runs of other processes are left alone.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { openDatabase } from '../../../engine/store/db';
import { RunOwnedError, Store, thisProcess } from '../../../engine/store/store';

const fresh = () => new Store(openDatabase(join(mkdtempSync(join(tmpdir(), 'arbor-owner-')), 'arbor.db')));
/** A pid that is certainly dead: a child that already exited (and was reaped). */
const deadPid = () => spawnSync(process.execPath, ['-e', '0']).pid!;

describe('run owners', () => {
  it('refuses a second live writer with a message naming it, and lets the owner claim again', () => {
    const s = fresh();
    const id = s.createRun({ name: 'r', status: 'running' });
    // The parent of this test process is alive: a stand-in for another live writer.
    s.claimRun(id, { pid: process.ppid, host: hostname() });
    expect(() => s.claimRun(id)).toThrow(RunOwnedError);
    expect(() => s.claimRun(id)).toThrow(new RegExp(`run "${id}" is running in another process \\(pid ${process.ppid} on ${hostname()}`));
    expect(s.recoverOrphans()).toEqual([]);
    expect(s.getRun(id).status).toBe('running');
    s.claimRun(id, { pid: process.ppid, host: hostname() });
    // A run that is not live can be taken over.
    s.setStatus(id, 'stopped');
    s.claimRun(id);
    expect(s.runOwner(id)).toMatchObject(thisProcess());
  });

  it('turns a run whose owner died into interrupted, with its last step and checkpoint', () => {
    const s = fresh();
    const id = s.createRun({ name: 'r', status: 'running' });
    s.claimRun(id, { pid: deadPid(), host: hostname() });
    s.writeMetrics(id, 7, { loss: 1 });
    const ck = mkdtempSync(join(tmpdir(), 'arbor-ck-'));
    s.addCheckpoint(id, 5, ck);
    const q = s.createRun({ name: 'q', status: 'queued' });
    s.claimRun(q, { pid: deadPid(), host: hostname() });
    expect(s.recoverOrphans().sort()).toEqual([id, q].sort());
    const r = s.getRun(id);
    expect(r.status).toBe('interrupted');
    expect(r.error).toMatch(/last step 7, last checkpoint at step 5; resume to continue from it/);
    expect(r.endedAt).not.toBeNull();
    expect(s.getRun(q).status).toBe('stopped');
    // An interrupted run is free to resume: anyone may claim it.
    s.claimRun(id);
    expect(s.runOwner(id)?.pid).toBe(process.pid);
  });

  it('an owner on another host counts as gone only once its heartbeat is stale', () => {
    const s = fresh();
    const id = s.createRun({ name: 'r', status: 'running' });
    s.claimRun(id, { pid: 1, host: 'elsewhere' });
    expect(s.recoverOrphans()).toEqual([]);
    s.db.prepare('UPDATE runs SET heartbeat_at = ? WHERE id = ?').run(Date.now() / 1000 - 3600, id);
    expect(s.recoverOrphans()).toEqual([id]);
  });

  it('heartbeat refreshes only live runs of this process', () => {
    const s = fresh();
    const id = s.createRun({ name: 'r', status: 'running' });
    s.claimRun(id);
    s.db.prepare('UPDATE runs SET heartbeat_at = 0 WHERE id = ?').run(id);
    s.heartbeat();
    expect(s.runOwner(id)!.heartbeatAt!).toBeGreaterThan(Date.now() / 1000 - 60);
    s.releaseRun(id);
    expect(s.runOwner(id)).toBeNull();
  });
});
