// The branch tree's state in the zustand store, through the real protocol client and WebSocket
// against a real engine server on a workspace holding a branched group (written through the
// store API): the group's summaries load with the open sample, tree keys open samples (also
// ones the list's filter hides), quick key presses end on the last one pressed.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase } from '../../engine/store/db';
import { Store } from '../../engine/store/store';
import { EngineServer } from '../../engine/server/server';
import type { WebServer } from '../../engine/server/transports';
import type { Transport } from '../../renderer/src/api/transports';
import type { ArborStore } from '../../renderer/src/store';
import { buildBranchTree } from '../../renderer/src/lib/branchTree';
import { storeOverWebSocket } from '../engine/server/fixtures/ws-store';
import { branchedGroup, plainGroup } from './fixtures/branched-group';

let home: string;
let engine: EngineServer;
let web: WebServer;
let transport: Transport;
let store: ArborStore;
let runId: string;

beforeAll(async () => {
  home = mkdtempSync(join(tmpdir(), 'arbor-branch-store-'));
  const db = openDatabase(join(home, 'arbor.db'));
  const s = new Store(db);
  runId = s.createRun({ name: 'arpo-branches', status: 'completed' });
  for (const t of [...branchedGroup(), ...plainGroup()]) s.writeTrajectory(runId, t);
  db.close();
  engine = new EngineServer({ home, templates: [] });
  ({ web, transport, store } = await storeOverWebSocket(engine));
});

afterAll(async () => {
  transport?.close();
  await web?.close();
  engine?.close();
  rmSync(home, { recursive: true, force: true });
});

const s = () => store.getState();
const open = () => s().traj.current?.sample;

describe('branch tree state against a real engine', () => {
  it('loads the open sample’s whole group and walks it by tree keys, also past the list filter', async () => {
    await s().trajListActions.open(runId);
    expect(open()).toBe(0);
    expect(s().tree.group.map((t) => [t.sample, t.branch?.parent ?? null])).toEqual([
      [0, null],
      [1, null],
      [2, 0],
      [3, 0],
      [4, 2],
      [5, 1],
    ]);
    // The filter hides samples 1, 2 and 3 of the list; the tree still has all six and opens them.
    await s().trajListActions.setFilter({ minReward: 0.75 });
    expect(
      s()
        .trajList.items.filter((t) => t.group === 0)
        .map((t) => t.sample),
    ).toEqual([0, 4, 5]);
    await s().treeActions.move('down');
    expect(open()).toBe(2);
    expect(s().traj.index).toBe(-1);
    expect(s().traj.current!.branch).toMatchObject({ parent: 0, turn: 3 });
    expect(s().traj.turn).toBe(3); // opened at its branch point: after the prompt and 2 shared turns
    await s().treeActions.move('right');
    expect(open()).toBe(4);
    expect(s().traj.index).toBe(s().trajList.items.findIndex((t) => t.id === s().traj.current!.id));
    await s().treeActions.openParent();
    expect(open()).toBe(2);
    // ← on an expanded node collapses it (the open sample stays), → opens it again.
    const id2 = s().traj.current!.id;
    await s().treeActions.move('left');
    expect(s().tree.collapsed).toEqual([id2]);
    expect(open()).toBe(2);
    await s().treeActions.move('right');
    expect(s().tree.collapsed).toEqual([]);
    await s().treeActions.move('left');
    // → from the collapsed node's replay (the global key) expands it and opens its first branch.
    await s().treeActions.openFirstBranch();
    expect(s().tree.collapsed).toEqual([]);
    expect(open()).toBe(4);
    await s().trajListActions.setFilter({ minReward: undefined });
  });

  it('ends on the node of the last key when keys come faster than samples load', async () => {
    await s().trajListActions.open(runId);
    await s().treeActions.move('home');
    expect(open()).toBe(0);
    // Visible order 0, 2, 4, 3, 1, 5: three ↓ without waiting end on sample 3.
    await Promise.all([s().treeActions.move('down'), s().treeActions.move('down'), s().treeActions.move('down')]);
    expect(open()).toBe(3);
    expect(s().tree.focus).toBe(s().traj.current!.id);
    await s().treeActions.move('end');
    expect(open()).toBe(5);
  });

  it('an unbranched group has no tree, and its keys do nothing', async () => {
    const i = s().trajList.items.findIndex((t) => t.group === 1);
    await s().trajActions.openSample(i);
    expect(s().traj.current!.group).toBe(1);
    expect(s().tree.group.map((t) => t.sample)).toEqual([0, 1, 2]);
    expect(buildBranchTree(s().tree.group).branched).toBe(false);
    const id = s().traj.current!.id;
    await s().treeActions.move('down');
    await s().treeActions.openFirstBranch();
    await s().treeActions.openParent();
    expect(s().traj.current!.id).toBe(id);
  });
});
