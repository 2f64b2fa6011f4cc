// Stepping through and intervening, in Chromium against a real engine (`arbor serve`) and a real
// short GRPO run (the tiny model on the multi-hop task, two steps, checkpoints at both, two
// mini-batches so the second sees moved weights): every value on screen is checked against the
// store through the protocol.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { engineRequest, openBrowser, screenshotIfFailed, shot, startEngine, type Browser, type Engine } from './harness';
import type { TrajectorySummary, TrajectoryDetail } from '../../engine/server/protocol';

let engine: Engine | undefined;
let browser: Browser | undefined;

beforeEach(async () => {
  engine = await startEngine();
  browser = await openBrowser();
});

afterEach(async (ctx) => {
  await screenshotIfFailed(ctx, browser?.page, browser?.errors);
  await browser?.close();
  await engine?.stop();
  browser = engine = undefined;
});

async function req<T>(method: string, params?: unknown): Promise<T> {
  const r = await engineRequest(engine!, method, params);
  if (r.error) throw new Error(`${method}: ${r.error.message}`);
  return r.result as T;
}

/**
 * The open trajectory's id, read from the URL (sample=…) once the header shows it. (Ids are small
 * integers here: a header merely containing "9" matched any trajectory whose text has a 9.)
 */
async function openSample(page: Page): Promise<string | null> {
  const id = await page.evaluate(() => new URLSearchParams(window.location.hash.split('?')[1] ?? '').get('sample'));
  return id && (await page.getByTestId('traj-header').innerText()).includes(id) ? id : null;
}

/** The values of the rendered token spans of the open trajectory: turn, token, the channel's value (null when none). */
async function renderedValues(page: Page): Promise<{ turn: number; tok: number; value: number | null }[]> {
  return page.evaluate(() =>
    [...document.querySelectorAll<HTMLElement>('[data-testid="turns"] span.t')].map((el) => ({
      turn: Number(el.dataset.turn),
      tok: Number(el.dataset.tok),
      value: el.dataset.value === undefined ? null : Number(el.dataset.value),
    })),
  );
}

describe('replay: what-if, training signal, verdict, URL', () => {
  it('forks a tool turn with an edited observation and an earlier checkpoint; advantage and clipped channels, verdict, list, group view and URL equal the store', async () => {
    const started = await req<{ id: string }>('runs.start', {
      template: 'multihop',
      name: 'replay-e2e',
      config: {
        model: { init: 'tiny' },
        task: { kind: 'multihop' },
        steps: 2,
        rollout: { prompts_per_step: 2, n: 4, max_turns: 3, max_new_tokens: 8 },
        // The KL to the reference in the reward, so step 2's advantages are not zero even where the
        // untrained model's rewards are; a tiny clip range so the second mini-batch's moved ratios are clipped.
        algorithm: { kl_coef: 0.5, kl_in: 'reward', mini_batches: 2, entropy_coef: 0.05, clip_ratio_low: 0.0005, clip_ratio_high: 0.0005 },
        optim: { lr: 0.003 },
        eval: { every: 0, n_questions: 2 },
        checkpoint: { every: 1, keep: 3 },
        logging: { full_trajectories_every: 1 },
      },
    });
    const runId = started.id;
    await expect.poll(async () => (await req<{ status: string }>('runs.get', { id: runId })).status, { timeout: 120_000, interval: 500 }).toBe('completed');
    const cks = await req<{ id: string; step: number }[]>('checkpoints.list', { runId });
    expect(cks.map((c) => c.step)).toEqual([1, 2]);
    const list = await req<TrajectorySummary[]>('trajectories.list', { runId, step: 2 });
    expect(list).toHaveLength(8);

    const { page, errors } = browser!;
    await page.goto(engine!.url);
    await page.getByTestId('engine-status').getByText('connected').waitFor();
    await page.getByTestId('nav-trajectories').click();
    await page.getByTestId('traj-run').selectOption({ label: 'replay-e2e' });
    await page.getByTestId('traj-header').waitFor();
    await expect.poll(() => page.getByTestId('traj-row').count()).toBe(8);

    // ---- list rows: the task's user message; flat groups and truncated episodes flagged ------
    const rows = await page.getByTestId('traj-row-text').allInnerTexts();
    const sorted = [...list].sort((a, b) => a.group - b.group || a.sample - b.sample);
    sorted.forEach((t, i) => {
      const q = t.outcomeData.question as string;
      expect(rows[i]).toContain(q);
      expect(rows[i]).not.toMatch(/<\|im_start\|>|^\s*system/);
    });
    // Flat: every sample has the same reward and no advantage (zero variance, no signal).
    const flat = new Set(
      [...new Set(sorted.map((t) => t.group))].filter((g) => {
        const ts = sorted.filter((t) => t.group === g);
        return ts.every((t) => t.reward === ts[0]!.reward && Math.abs(t.advantage ?? 0) < 1e-9);
      }),
    );
    expect(await page.getByTestId('flat-flag').count()).toBe(sorted.filter((t) => flat.has(t.group)).length);
    expect(await page.getByTestId('truncated-flag').count()).toBe(sorted.filter((t) => t.outcomeData.truncated === true).length);

    // ---- a trajectory with a tool turn ------------------------------------------------------
    const full = await Promise.all(sorted.map((t) => req<TrajectoryDetail>('trajectories.get', { id: t.id })));
    // The trajectory with a tool turn whose tokens carry the most signal (non-zero advantages, clipped tokens).
    const signal = (t: TrajectoryDetail) =>
      t.turnsData.reduce((a, u) => a + (u.clipped ?? []).filter((c) => c !== 0).length + (u.advantage ?? []).filter((x) => x !== 0).length, 0);
    const withTool = full.map((t, i) => ({ t, i })).filter(({ t }) => t.turnsData.some((u, j) => j > 0 && u.role === 'tool'));
    expect(withTool.length).toBeGreaterThan(0);
    const k = withTool.sort((a, b) => signal(b.t) - signal(a.t))[0]!.i;
    expect(full[k]!.turnsData.some((u) => (u.clipped ?? []).some((c) => c !== 0))).toBe(true);
    expect(full[k]!.turnsData.some((u) => (u.advantage ?? []).some((x) => x !== 0))).toBe(true);
    const parent = full[k]!;
    await page.getByTestId('traj-row').nth(k).click();
    await expect.poll(() => openSample(page)).toBe(parent.id);

    // Verdict strip against the stored outcome.
    const verdict = page.getByTestId('verdict');
    const o = parent.outcomeData as { golds?: string[]; exactMatch?: boolean; formatOk?: boolean; truncated?: boolean };
    expect(await verdict.getByTestId('verdict-answer').innerText()).toContain(parent.outcome === undefined ? '—' : JSON.stringify(parent.outcome));
    if (o.golds) for (const g of o.golds) expect(await verdict.getByTestId('verdict-golds').innerText()).toContain(JSON.stringify(g));
    expect(await verdict.getByTestId('verdict-exact').innerText()).toBe(o.exactMatch ? '✓ exact match' : '✗ no exact match');
    expect(await verdict.getByTestId('verdict-format').innerText()).toBe(`format ${o.formatOk ? 'ok' : 'broken'}`);
    expect(await verdict.getByTestId('verdict-truncated').innerText()).toContain(o.truncated ? 'truncated' : 'ended by the episode');
    expect(await verdict.getByTestId('verdict-reward').innerText()).toContain(parent.reward.toFixed(4));
    expect(await verdict.getByTestId('verdict-timings').innerText()).toContain(`${Math.round(parent.timings.totalMs!)} ms in all`);
    // No retokenisation drift on the engine's own trajectories.
    await expect.poll(() => page.getByTestId('drift-summary').getAttribute('data-drifted')).toBe('false');

    // ---- heat map: advantage and clipped, token for token equal to the store -----------------
    const stored = (get: (u: TrajectoryDetail['turnsData'][number]) => (number | null)[] | null | undefined, trainedOnly: boolean) =>
      parent.turnsData.flatMap((u, turn) =>
        u.tokenIds.map((_, tok) => {
          const v = get(u)?.[tok];
          const off = trainedOnly && u.lossMask?.[tok] === 0;
          return { turn, tok, value: v === undefined || v === null || !Number.isFinite(v) || off ? null : v };
        }),
      );
    const close = (a: { value: number | null }[], b: { value: number | null }[]) => {
      expect(a.length).toBe(b.length);
      a.forEach((x, i) => {
        if (b[i]!.value === null) expect(x.value).toBeNull();
        else expect(x.value!).toBeCloseTo(b[i]!.value!, 5);
      });
    };
    await page.getByTestId('channel-advantage').click();
    await expect.poll(() => page.getByTestId('channel-active').innerText()).toBe('advantage');
    expect(await page.getByTestId('channel-ticks').innerText()).toMatch(/≤ −2[\s\S]*0[\s\S]*≥ 2/);
    close(
      await renderedValues(page),
      stored((u) => u.advantage, false),
    );
    // The header's advantage is the mean over the model's tokens, as the tokens carry it.
    const modelAdv = parent.turnsData.flatMap((u) => (u.advantage ?? []).filter((_, i) => u.lossMask?.[i] === 1)) as number[];
    const meanAdv = modelAdv.reduce((a, b) => a + b, 0) / modelAdv.length;
    expect(await page.getByTestId('traj-advantage-mean').innerText()).toBe(meanAdv.toFixed(3));
    expect(Number(await page.getByTestId('traj-advantage-mean').innerText())).toBeCloseTo(parent.advantage!, 3);
    const g = parent.signal!.group!;
    expect(await page.getByTestId('traj-group-stats').innerText()).toContain(`group reward mean ${g.mean.toFixed(3)}, std ${g.std.toFixed(3)} (n 4)`);
    await page.getByTestId('channel-clipped').click();
    await expect.poll(() => page.getByTestId('channel-active').innerText()).toBe('clipped');
    close(
      await renderedValues(page),
      stored((u) => u.clipped, true),
    );
    await page.getByTestId('channel-ratio').click();
    close(
      await renderedValues(page),
      stored((u) => u.ratio, true),
    );
    await shot(page, 'view-replay-ratio');
    // Entropy on its absolute 0–3 scale, then auto range: the scale is the trajectory's largest entropy.
    await page.getByTestId('channel-entropy').click();
    expect(await page.getByTestId('channel-ticks').innerText()).toMatch(/≥ 3\s*$/);
    const maxH = Math.max(...parent.turnsData.flatMap((u) => (u.entropy ?? []).filter((x): x is number => x !== null && Number.isFinite(x)).map(Math.abs)));
    await page.getByTestId('auto-range').check();
    await expect.poll(() => page.getByTestId('channel-ticks').innerText()).toMatch(new RegExp(`≥ ${String(+maxH.toFixed(2)).replace('.', '\\.')}\\s*$`));
    await page.getByTestId('auto-range').uncheck();

    // ---- token cursor + pinned inspector + top-k --------------------------------------------
    await page.getByTestId('channel-advantage').click();
    await page.locator('body').click({ position: { x: 5, y: 5 } });
    const firstModel = parent.turnsData.findIndex((u) => u.role === 'model');
    const promptLen = parent.turnsData[0]!.tokenIds.length;
    // From the top: l walks the prompt's tokens, then into the model's first turn.
    await page.keyboard.press('j');
    await page.keyboard.press('k');
    for (let i = 0; i < promptLen + 1; i++) await page.keyboard.press('l');
    const insp = page.getByTestId('token-inspector');
    await insp.waitFor();
    await expect.poll(() => page.getByTestId('inspector-pos').innerText()).toBe(`${firstModel + 1} · 0`);
    const mu = parent.turnsData[firstModel]!;
    expect(await page.getByTestId('inspector-id').innerText()).toBe(String(mu.tokenIds[0]));
    expect(await page.getByTestId('inspector-advantage').innerText()).toBe(mu.advantage![0]!.toFixed(4));
    expect(await page.getByTestId('inspector-ratio').innerText()).toBe(mu.ratio![0]!.toFixed(4));
    expect(await page.getByTestId('inspector-logprob').innerText()).toBe(mu.logprob![0]!.toFixed(4));
    await page.keyboard.press('a');
    await page.getByTestId('inspector-topk').waitFor({ timeout: 60_000 });
    expect(await page.getByTestId('inspector-alt').count()).toBe(8);
    // the run's step-1 checkpoint is the one saved right before the sampled step: named as its weights
    expect(await page.getByTestId('inspector-topk').innerText()).toContain('under the step-1 checkpoint: the weights that sampled step');
    await shot(page, 'view-replay-inspector');
    await page.keyboard.press('Escape');

    // ---- URL state: run, step, sample, channel; reload and back ----------------------------
    const hash = await page.evaluate(() => window.location.hash);
    expect(hash).toBe(`#/trajectories?run=${runId}&step=2&sample=${parent.id}&channel=advantage`);
    await page.reload();
    await page.getByTestId('engine-status').getByText('connected').waitFor();
    await expect.poll(() => page.getByTestId('traj-header').innerText(), { timeout: 30_000 }).toContain(parent.id);
    expect(await page.getByTestId('channel-active').innerText()).toBe('advantage');
    const other = sorted[(k + 1) % sorted.length]!;
    await page
      .getByTestId('traj-row')
      .nth((k + 1) % sorted.length)
      .click();
    await expect.poll(() => openSample(page)).toBe(other.id);
    await page.goBack();
    await expect.poll(() => openSample(page)).toBe(parent.id);

    // ---- what-if: fork at the tool turn with an edited observation, the step-1 checkpoint ----
    const toolTurn = parent.turnsData.findIndex((u, i) => i > 0 && u.role === 'tool');
    const panel = page.getByTestId('fork-panel');
    await panel.scrollIntoViewIfNeeded();
    expect(await page.getByTestId('fork-turn').inputValue()).toBe(String(toolTurn));
    expect(await page.getByTestId('fork-checkpoint').inputValue()).toBe(`${runId}:1`);
    await page.getByTestId('fork-edit').fill('the city is in nowhere');
    await page.getByTestId('fork-n').fill('3');
    await page.getByTestId('fork-run').click();
    await expect.poll(() => page.getByTestId('fork-child').count(), { timeout: 120_000 }).toBe(3);
    const forks = await req<TrajectorySummary[]>('replay.forks', { trajectoryId: parent.id });
    expect(forks).toHaveLength(3);
    const shownRewards = await page.getByTestId('fork-child-reward').allInnerTexts();
    expect(shownRewards).toEqual(forks.map((f) => f.reward.toFixed(3)));
    for (const f of forks) {
      expect(f.fork!.parent).toBe(parent.id);
      expect(f.fork!.checkpoint.id).toBe(`${runId}:1`);
      expect(f.fork!.turn).toBe(toolTurn);
      expect(f.fork!.edit!.kind).toBe('observation');
      // The prefix is the parent's stored ids exactly, then the edit's ids.
      const c = await req<TrajectoryDetail>('trajectories.get', { id: f.id });
      const ids = c.turnsData.flatMap((u) => u.tokenIds);
      const shared = parent.turnsData.slice(0, toolTurn).flatMap((u) => u.tokenIds);
      expect(ids.slice(0, shared.length)).toEqual(shared);
      expect(ids.slice(shared.length, shared.length + f.fork!.edit!.ids.length)).toEqual(f.fork!.edit!.ids);
    }
    expect(await page.getByTestId('fork-edit-ids').innerText()).toBe(`[${forks[0]!.fork!.edit!.ids.join(' ')}]`);
    await page.getByTestId('fork-score').waitFor();
    await page.getByTestId('fork-children').scrollIntoViewIfNeeded();
    await shot(page, 'view-replay-fork');
    // A continuation opens with where it came from; its parent is one click away.
    await page.getByTestId('fork-child').first().click();
    await expect
      .poll(() => page.getByTestId('traj-fork-origin').innerText())
      .toContain(`what-if replay of trajectory ${parent.id} at turn ${toolTurn + 1}, observation edited`);
    // Labelled as a fork (not as one of the group's samples), its edited turn marked, the tool-call card above it too.
    expect(await page.getByTestId('traj-fork-label').innerText()).toMatch(/^what-if fork · continuation [1-3] of 3$/);
    expect(await page.getByTestId('traj-header').innerText()).not.toMatch(/sample \d+ of/);
    await expect.poll(() => page.getByTestId('turn-edited').count()).toBe(1);
    expect(await page.getByTestId('turn-edited').innerText()).toMatch(/^✎ what-if edit: the (tool's result|observation) replaced$/);
    // The tool-call card of the model turn before it (when that turn made a parsed call) says its result was replaced.
    const callsBefore = parent.turnsData[toolTurn - 1]?.toolCalls?.length ?? 0;
    expect(await page.getByTestId('toolcall-replaced').count()).toBe(callsBefore ? 1 : 0);
    if (callsBefore) expect(await page.getByTestId('toolcall-replaced').innerText()).toContain(`turn ${toolTurn + 1} shows an edited result instead`);
    await shot(page, 'view-replay-fork-child');
    await page.getByTestId('traj-fork-parent').click();
    await expect.poll(() => openSample(page)).toBe(parent.id);

    // ---- group view: aligned, shared prefix collapsed, first divergent token, mean/std ------
    await page.keyboard.press('g');
    await page.getByTestId('group-view').waitFor();
    const group = full.filter((t) => t.group === parent.group);
    const flatIds = group.map((t) => t.turnsData.flatMap((u) => u.tokenIds));
    let p = 0;
    while (p < Math.min(...flatIds.map((f) => f.length)) && flatIds.every((f) => f[p] === flatIds[0]![p])) p++;
    expect(await page.getByTestId('group-prefix-tokens').innerText()).toBe(String(p));
    const mean = group.reduce((a, t) => a + t.reward, 0) / group.length;
    const std = Math.sqrt(group.reduce((a, t) => a + (t.reward - mean) ** 2, 0) / (group.length - 1));
    expect(await page.getByTestId('group-stats').innerText()).toContain(`reward mean ${mean.toFixed(3)} · std ${std.toFixed(3)}`);
    expect(await page.getByTestId('group-col').count()).toBe(4);
    // The jump strip names every sample; those whose reward is unlike the group's most common one are marked.
    expect(await page.getByTestId('group-jump-sample').count()).toBe(4);
    const bySample = [...group].sort((x, y) => x.sample - y.sample);
    const counts = new Map<string, number>();
    for (const t of bySample) counts.set(t.reward.toFixed(6), (counts.get(t.reward.toFixed(6)) ?? 0) + 1);
    const top = [...counts.values()].sort((x, y) => y - x);
    const oddWanted = top.length < 2 || top[0] === top[1] ? 0 : bySample.filter((t) => counts.get(t.reward.toFixed(6)) !== top[0]).length;
    expect(await page.locator('[data-testid="group-jump-sample"][data-odd="true"]').count()).toBe(oddWanted);
    expect(await page.getByTestId('token-diverge').count()).toBeGreaterThan(0);
    await shot(page, 'view-replay-group');
    expect(errors).toEqual([]);
  }, 300_000);
});

describe('playground: a live rollout you can pause', () => {
  it('by keyboard: start, step a token, see the top-k, force one, finish the turn, edit the tool result, run to the end; the episode is stored and opens in the replay', async () => {
    const started = await req<{ id: string }>('runs.start', {
      template: 'multihop',
      name: 'live-e2e',
      config: {
        model: { init: 'tiny' },
        task: { kind: 'multihop' },
        steps: 1,
        rollout: { prompts_per_step: 1, n: 2, max_turns: 3, max_new_tokens: 6 },
        eval: { every: 0, n_questions: 2 },
        checkpoint: { every: 1, keep: 1 },
        logging: { full_trajectories_every: 1 },
      },
    });
    await expect
      .poll(async () => (await req<{ status: string }>('runs.get', { id: started.id })).status, { timeout: 120_000, interval: 500 })
      .toBe('completed');
    const { page, errors } = browser!;
    await page.goto(engine!.url);
    await page.getByTestId('engine-status').getByText('connected').waitFor();
    // Trajectories open on this run first: the Step-through link must still show the view (issue 40: it only set the step).
    await page.getByTestId('nav-trajectories').click();
    await page.getByTestId('traj-run').selectOption({ label: 'live-e2e' });
    await page.getByTestId('traj-header').waitFor();
    await page.getByTestId('nav-playground').click();
    await expect.poll(() => page.getByTestId('checkpoint-select').inputValue()).toBe(`${started.id}:1`);
    await page.getByTestId('playground-mode-step').click();
    await page.getByTestId('live-temperature').fill('0');
    const phase = () => page.getByTestId('live-phase').getAttribute('data-phase');
    const focusBody = () => page.locator('body').click({ position: { x: 400, y: 600 } });
    // Until a model turn ends in a tool call (the untrained model may also answer): s starts an episode.
    let forcedToken = '';
    for (let attempt = 0; attempt < 5; attempt++) {
      await focusBody();
      await page.keyboard.press('s');
      await expect.poll(phase, { timeout: 60_000 }).toBe('model');
      await expect.poll(() => page.getByTestId('live-alt').count()).toBe(8);
      const probs = (await page.getByTestId('live-alt-prob').allInnerTexts()).map(Number);
      expect(probs.every((p, i) => p > 0 && (i === 0 || p <= probs[i - 1]!))).toBe(true);
      // n: one token; then 2: force the second alternative.
      await page.keyboard.press('n');
      await expect.poll(async () => await page.getByTestId('live-turn').last().locator('span.t').count()).toBe(1);
      const alt2 = JSON.parse((await page.getByTestId('live-alt').nth(1).locator('td').nth(1).innerText()).trim()) as string;
      await page.keyboard.press('2');
      await expect.poll(() => page.getByTestId('live-forced').count()).toBe(1);
      forcedToken = alt2;
      expect((await page.getByTestId('live-forced').innerText()).trim()).toBe(alt2.trim());
      await shot(page, 'view-live-model');
      await page.keyboard.press('t');
      await expect.poll(phase, { timeout: 60_000 }).not.toBe('model');
      if ((await phase()) === 'tool') break;
    }
    expect(await phase()).toBe('tool');
    // e: edit the tool's result before the model sees it; Ctrl+Enter gives it.
    const pending = await page.getByTestId('live-observation').inputValue();
    const edited = `${pending.split(/\s+/).slice(0, 3).join(' ')} </information>`;
    await page.keyboard.press('e');
    await page.keyboard.press('Control+a');
    await page.keyboard.type(edited);
    await shot(page, 'view-live-tool');
    await page.keyboard.press('Control+Enter');
    await expect.poll(phase, { timeout: 60_000 }).not.toBe('tool');
    expect(await page.getByTestId('live-turns').innerText()).toContain('edited by you');
    // r: to the end.
    await focusBody();
    await page.keyboard.press('r');
    await expect.poll(phase, { timeout: 60_000 }).toBe('done');
    const result = page.getByTestId('live-result');
    const id = (await page.getByTestId('live-open').innerText()).trim();
    const t = await req<TrajectoryDetail>('trajectories.get', { id });
    expect(t.step).toBe(-1);
    expect((await result.innerText()).replace(/\s+/g, ' ')).toContain(`reward ${t.reward.toFixed(4)}`);
    // The task's gold answers beside the model's, as stored with the episode.
    const golds = t.outcomeData.golds as string[];
    expect(golds.length).toBeGreaterThan(0);
    expect((await result.innerText()).replace(/\s+/g, ' ')).toContain(`gold ${golds.map((g) => JSON.stringify(g)).join(' / ')}`);
    const live = t.outcomeData.live as { forced: { turn: number; token: number }[]; edited: number[] };
    expect(live.forced).toEqual([{ turn: 1, token: 1 }]);
    expect(t.turnsData[1]!.tokens[1]).toBe(forcedToken);
    expect(live.edited).toEqual([2]);
    expect(t.turnsData[2]!.role).toBe('tool');
    await shot(page, 'view-live-done');
    // Stored like any other: it opens in the replay (run, step −1).
    await page.getByTestId('live-open').click();
    await page.getByTestId('view-trajectories').waitFor();
    await expect.poll(() => page.getByTestId('traj-header').innerText(), { timeout: 30_000 }).toContain(id);
    expect(await page.getByTestId('traj-step').inputValue()).toBe('-1');
    expect(await page.getByTestId('traj-step').locator('option:checked').innerText()).toBe('−1 (playground)');
    // The forced token and the edited observation are marked in the replay too.
    await expect.poll(() => page.getByTestId('turn-forced').innerText()).toBe('1 forced token (outlined)');
    expect(await page.getByTestId('turn-edited').innerText()).toBe('✎ live rollout: the observation edited before the model saw it');
    expect(errors).toEqual([]);
  }, 300_000);
});
