import { useEffect, useMemo, useRef, useState } from 'react';
import { useVirtualizer } from '@tanstack/react-virtual';
import { useShallow } from 'zustand/react/shallow';
import { useArbor, useArborStore } from '../store/react';
import type { Trajectory, TrajSummary } from '../api/types';
import { CHANNELS, channelScale, channelValue, neutralNote, rampCss, scaleTicks, type Channel } from '../lib/heat';
import { steeringOf } from '../lib/steering';
import { oddSamples } from '../lib/group';
import { weightsNote } from '../components/Weights';
import { buildRows, ForkIcon, isWordLevel, TokenHoverCard, TokenSpan, ToolCalls, TurnHead, type TurnDrift } from '../components/Turns';
import { siblingsOf, type TokenCursor, type TrajSort } from '../store/trajectories';
import { taskMessage, VerdictStrip } from '../components/Verdict';
import { ForkPanel } from '../components/ForkPanel';
import { TokenInspector } from '../components/TokenInspector';
import { buildBranchTree, turnOrigins, type BranchTree, type TurnOrigin } from '../lib/branchTree';
import { BranchPointBadge, BranchTreePanel } from '../components/BranchTree';
import { JudgeBadge, JudgePanel, judgeOf } from '../components/JudgePanel';
import { isSftWarmStart } from '../lib/lineage';

/** The branch tree of the open trajectory's group, when its samples come from branching rollouts. */
function useBranchTree(): BranchTree | null {
  const traj = useArbor((s) => s.traj);
  const treeGroup = useArbor((s) => s.treeGroup);
  const treeKey = useArbor((s) => s.treeKey);
  return useMemo(() => {
    if (!traj || treeKey !== `${traj.runId}:${traj.step}:${traj.group}`) return null;
    const tree = buildBranchTree(treeGroup);
    return tree.branched ? tree : null;
  }, [traj, treeGroup, treeKey]);
}

/** Keyboard map of the replay view (ignored while typing in an input). */
export function useReplayKeys(enabled: boolean) {
  const store = useArborStore();
  useEffect(() => {
    if (!enabled) return;
    const onKey = (e: KeyboardEvent) => {
      const el = e.target as HTMLElement | null;
      if (el && (el.tagName === 'INPUT' || el.tagName === 'TEXTAREA' || el.tagName === 'SELECT' || el.isContentEditable)) return;
      if (e.ctrlKey || e.metaKey || e.altKey) return;
      const s = store.getState();
      let handled = true;
      switch (e.key) {
        case 'j':
          s.moveTurn(1);
          break;
        case 'k':
          s.moveTurn(-1);
          break;
        case 'ArrowDown':
          void s.moveSample(1);
          break;
        case 'ArrowUp':
          void s.moveSample(-1);
          break;
        case ']':
          void s.moveSibling(1);
          break;
        case '[':
          void s.moveSibling(-1);
          break;
        case 'c':
          s.cycleChannel();
          break;
        case 'g':
          void s.setGroupView(!s.groupView);
          break;
        // Branching rollouts: along the branches of the open group's tree.
        case 'ArrowLeft':
          void s.openBranchParent();
          break;
        case 'ArrowRight':
          void s.openFirstBranch();
          break;
        // The token cursor and its inspector.
        case 'l':
          s.moveCursor(1);
          break;
        case 'h':
          s.moveCursor(-1);
          break;
        case 'a':
          if (s.cursor) void s.loadTopK();
          else handled = false;
          break;
        case 'Escape':
          if (s.cursor) s.setCursor(null);
          else handled = false;
          break;
        case 't': {
          const item = document.querySelector<HTMLElement>('[role="tree"] [role="treeitem"][tabindex="0"]');
          if (item) item.focus();
          else handled = false;
          break;
        }
        default:
          handled = false;
      }
      if (handled) e.preventDefault();
    };
    window.addEventListener('keydown', onKey);
    return () => window.removeEventListener('keydown', onKey);
  }, [enabled, store]);
}

/** The step selector's label: step −1 holds the playground's live rollouts (engine/playground/live.ts LIVE_STEP). */
export function stepLabel(step: number): string {
  return step === -1 ? '−1 (playground)' : String(step);
}

export function TrajectoriesView() {
  const runs = useArbor((s) => s.runs);
  const runId = useArbor((s) => s.trajRunId);
  const steps = useArbor((s) => s.steps);
  const step = useArbor((s) => s.step);
  const list = useArbor((s) => s.trajList);
  const filter = useArbor((s) => s.trajFilter);
  const traj = useArbor((s) => s.traj);
  const sampleIndex = useArbor((s) => s.sampleIndex);
  const channel = useArbor((s) => s.channel);
  const autoRange = useArbor((s) => s.autoRange);
  const groupView = useArbor((s) => s.groupView);
  const follow = useArbor((s) => s.follow);
  const trajSort = useArbor((s) => s.trajSort);
  // Flat groups: every sample has the same reward and no advantage (zero variance: no learning signal).
  const flatGroups = useMemo(() => {
    const by = new Map<string, TrajSummary[]>();
    for (const t of list) by.set(`${t.step}:${t.group}`, [...(by.get(`${t.step}:${t.group}`) ?? []), t]);
    return new Set(
      [...by].filter(([, ts]) => ts.length > 1 && ts.every((t) => t.reward === ts[0]!.reward && Math.abs(t.advantage ?? 0) < 1e-9)).map(([k]) => k),
    );
  }, [list]);
  const a = useArbor(
    useShallow((s) => ({
      open: s.openTrajectories,
      setStep: s.setStep,
      setFilter: s.setTrajFilter,
      openSample: s.openSample,
      setChannel: s.setChannel,
      setAutoRange: s.setAutoRange,
      setGroupView: s.setGroupView,
      setFollow: s.setFollow,
      setSort: s.setTrajSort,
    })),
  );
  useReplayKeys(true);
  const tree = useBranchTree();

  const listRef = useRef<HTMLDivElement>(null);
  const virt = useVirtualizer({ count: list.length, getScrollElement: () => listRef.current, estimateSize: () => 24, overscan: 20 });
  useEffect(() => {
    if (sampleIndex >= 0) virt.scrollToIndex(sampleIndex, { align: 'auto' });
  }, [sampleIndex, virt]);

  return (
    <div className="view" data-testid="view-trajectories" style={{ height: '100%' }}>
      <div className="toolbar">
        <h2>Trajectories</h2>
        <select value={runId ?? ''} onChange={(e) => e.target.value && void a.open(e.target.value)} data-testid="traj-run" aria-label="run">
          <option value="">(run)</option>
          {/* SFT warm starts store no trajectories (their RL runs do). */}
          {runs
            .filter((r) => !isSftWarmStart(r))
            .map((r) => (
              <option key={r.id} value={r.id}>
                {r.name}
              </option>
            ))}
        </select>
        <label className="muted">step</label>
        <select value={step ?? ''} onChange={(e) => void a.setStep(Number(e.target.value))} data-testid="traj-step" aria-label="step">
          {steps.map((s) => (
            <option key={s} value={s}>
              {stepLabel(s)}
            </option>
          ))}
        </select>
        <label className="muted">reward ≥</label>
        <input
          type="number"
          step="any"
          style={{ width: 64 }}
          value={filter.minReward ?? ''}
          aria-label="reward at least"
          onChange={(e) => void a.setFilter({ minReward: e.target.value === '' ? undefined : Number(e.target.value) })}
        />
        <label className="muted">≤</label>
        <input
          type="number"
          step="any"
          style={{ width: 64 }}
          value={filter.maxReward ?? ''}
          aria-label="reward at most"
          onChange={(e) => void a.setFilter({ maxReward: e.target.value === '' ? undefined : Number(e.target.value) })}
        />
        <label className="muted">
          <input type="checkbox" checked={filter.errorsOnly} onChange={(e) => void a.setFilter({ errorsOnly: e.target.checked })} /> errors
        </label>
        <input
          placeholder="task"
          aria-label="task filter"
          style={{ width: 100 }}
          value={filter.task}
          onChange={(e) => void a.setFilter({ task: e.target.value })}
        />
        <label className="muted">
          <input type="checkbox" checked={follow} onChange={(e) => void a.setFollow(e.target.checked)} data-testid="follow" /> follow live
        </label>
        <label className="muted">
          sort{' '}
          <select value={trajSort} onChange={(e) => a.setSort(e.target.value as TrajSort)} data-testid="traj-sort">
            <option value="order">group, sample</option>
            <option value="abs-advantage">|advantage|</option>
            <option value="clip-share">clipped share</option>
            <option value="kl">|KL|</option>
          </select>
        </label>
        <span className="grow" />
        <span className="muted" style={{ fontSize: 11 }}>
          <span className="kbd">j</span>/<span className="kbd">k</span> turns · <span className="kbd">↑</span>/<span className="kbd">↓</span> samples ·{' '}
          <span className="kbd">[</span>/<span className="kbd">]</span> siblings · <span className="kbd">c</span> colour · <span className="kbd">g</span> group
          · <span className="kbd">h</span>/<span className="kbd">l</span> token cursor
          {tree ? (
            <>
              {' '}
              · <span className="kbd">←</span>/<span className="kbd">→</span> parent/branch · <span className="kbd">t</span> tree
            </>
          ) : null}
        </span>
      </div>
      {!runId ? <div className="empty">Pick a run to replay its trajectories.</div> : null}
      {runId ? (
        <div className={`split ${tree && !groupView ? 'with-tree' : ''}`} style={{ minHeight: 0 }}>
          <div className="list" ref={listRef} style={{ height: 'calc(100vh - 120px)' }} data-testid="traj-list">
            <div className="list-row muted" style={{ cursor: 'default', position: 'sticky', top: 0, background: 'var(--panel)', zIndex: 1 }}>
              <span>grp</span>
              <span>smp</span>
              <span>prompt</span>
              <span style={{ textAlign: 'right' }}>reward</span>
              <span style={{ textAlign: 'right' }}>adv</span>
            </div>
            <div style={{ height: virt.getTotalSize(), position: 'relative' }}>
              {virt.getVirtualItems().map((v) => {
                const t = list[v.index];
                return (
                  <div
                    key={t.id}
                    className={`list-row ${v.index === sampleIndex ? 'sel' : ''}`}
                    style={{ position: 'absolute', top: 0, left: 0, right: 0, transform: `translateY(${v.start}px)` }}
                    onClick={() => void a.openSample(v.index)}
                    data-testid="traj-row"
                  >
                    <span className="mono">{t.group}</span>
                    <span className="mono" title={t.branch ? `branched from sample ${t.branch.parent}` : undefined}>
                      {t.sample}
                      {t.branch ? (
                        <span className="branch-mark fork">
                          <ForkIcon />
                        </span>
                      ) : null}
                    </span>
                    <span className="q" title={t.prompt} data-testid="traj-row-text">
                      {t.hasError ? <span style={{ color: 'var(--err)' }}>⚠ </span> : null}
                      {flatGroups.has(`${t.step}:${t.group}`) ? (
                        <span
                          className="flag"
                          title="every sample of this group has the same reward and no advantage: zero variance, no learning signal"
                          data-testid="flat-flag"
                        >
                          flat
                        </span>
                      ) : null}
                      {t.signal?.dropped ? (
                        <span
                          className="flag"
                          title="dynamic sampling dropped this flat group: stored as a sample so it can be read, never trained on"
                          data-testid="dropped-flag"
                        >
                          dropped
                        </span>
                      ) : null}
                      {(t.outcomeData as { truncated?: boolean }).truncated ? (
                        <span className="flag" title="a limit (turns, tokens) ended this episode" data-testid="truncated-flag">
                          truncated
                        </span>
                      ) : null}{' '}
                      {taskMessage(t)}
                    </span>
                    <span className="mono" style={{ textAlign: 'right', color: t.reward > 0 ? 'var(--ok)' : undefined }}>
                      {t.reward.toFixed(3)}
                    </span>
                    <span className="mono" style={{ textAlign: 'right' }}>
                      {t.advantage == null ? '—' : t.advantage.toFixed(2)}
                    </span>
                  </div>
                );
              })}
            </div>
            {list.length === 0 ? <div className="empty">No trajectories{step == null ? ' stored for this run yet' : ' match'}.</div> : null}
          </div>
          <div style={{ minWidth: 0, display: 'flex', flexDirection: 'column', gap: 8 }}>
            <div className="toolbar">
              <span className="muted">colour</span>
              {CHANNELS.map((c) => (
                <button key={c} className={c === channel ? 'primary' : ''} onClick={() => a.setChannel(c)} data-testid={`channel-${c}`}>
                  {c}
                </button>
              ))}
              <ChannelLegend traj={traj} channel={channel} />
              <label className="muted" title="scale the colours by this trajectory's own range (largest |value|) instead of the channel's absolute scale">
                <input type="checkbox" checked={autoRange} onChange={(e) => a.setAutoRange(e.target.checked)} data-testid="auto-range" /> auto range
              </label>
              {traj && !hasChannel(traj, channel) ? (
                <span className="muted" style={{ fontSize: 11 }} data-testid="channel-missing">
                  {channel === 'kl'
                    ? 'no reference logprobs stored for this trajectory (the run had no KL term)'
                    : channel === 'value'
                      ? 'no critic values stored (the run did not use PPO with a critic)'
                      : `no ${channel} values stored for this trajectory`}
                </span>
              ) : null}
              {traj && hasChannel(traj, channel) && neutralNote(traj.turnsData, channel) ? (
                <span className="muted" style={{ fontSize: 11 }} data-testid="channel-neutral">
                  {neutralNote(traj.turnsData, channel)}
                </span>
              ) : null}
              <span className="grow" />
              <label className="muted">
                <input type="checkbox" checked={groupView} onChange={(e) => void a.setGroupView(e.target.checked)} data-testid="group-toggle" /> group view
              </label>
            </div>
            {traj && !groupView && tree ? (
              <div className="branch-split">
                <BranchTreePanel tree={tree} />
                <div style={{ minWidth: 0, display: 'flex', flexDirection: 'column', gap: 8 }}>
                  <TrajectoryPane traj={traj} channel={channel} tree={tree} />
                </div>
              </div>
            ) : null}
            {traj && !groupView && !tree ? <TrajectoryPane traj={traj} channel={channel} tree={null} /> : null}
            {traj && groupView ? <GroupPane /> : null}
            {!traj && list.length ? <div className="empty">Loading…</div> : null}
          </div>
        </div>
      ) : null}
    </div>
  );
}

/** The active channel with its ramp and the numbers of its scale (absolute: the same for every trajectory). */
function ChannelLegend({ traj, channel }: { traj: Trajectory | null; channel: Channel }) {
  const auto = useArbor((s) => s.autoRange);
  const scale = useMemo(() => channelScale(traj?.turnsData ?? [], channel, (t) => (t as { tokens: string[] }).tokens.length, auto), [traj, channel, auto]);
  const [lo, mid, hi] = scaleTicks(channel, scale);
  return (
    <span className="legend-bar" data-testid="channel-legend">
      <span style={{ display: 'inline-flex', flexDirection: 'column' }}>
        <span className="ramp" style={{ background: rampCss(channel) }} />
        <span className="legend-ticks" data-testid="channel-ticks">
          <span>{lo}</span>
          <span>{mid}</span>
          <span>{hi}</span>
        </span>
      </span>{' '}
      <span data-testid="channel-active">{channel}</span>
    </span>
  );
}

/**
 * The trajectory's advantage as its tokens carry it: the mean over the model's tokens (what the
 * stored summary holds), the range of the per-token values, the outcome and process parts, and the
 * group's reward mean and std that normalised it.
 */
function AdvantageSummary({ traj }: { traj: Trajectory }) {
  const st = useMemo(() => {
    let n = 0;
    let sum = 0;
    let lo = Infinity;
    let hi = -Infinity;
    let out = 0;
    let proc = 0;
    let parts = false;
    for (const u of traj.turnsData)
      u.tokenIds.forEach((_, i) => {
        if (u.lossMask && u.lossMask[i] === 0) return;
        const a = u.advantage?.[i];
        if (a == null || !Number.isFinite(a)) return;
        n++;
        sum += a;
        lo = Math.min(lo, a);
        hi = Math.max(hi, a);
        if (u.advOutcome && u.advProcess) {
          parts = true;
          out += u.advOutcome[i] ?? 0;
          proc += u.advProcess[i] ?? 0;
        }
      });
    return n ? { n, mean: sum / n, lo, hi, out: out / n, proc: proc / n, parts } : null;
  }, [traj]);
  const g = traj.signal?.group;
  if (!st) return traj.advantage != null ? <span>advantage {traj.advantage.toFixed(3)}</span> : null;
  return (
    <span data-testid="traj-advantage">
      advantage{' '}
      <b className="mono" title={`mean over the ${st.n} model tokens`} data-testid="traj-advantage-mean">
        {st.mean.toFixed(3)}
      </b>
      <span className="muted">
        {' '}
        (mean of {st.n} tokens{st.hi - st.lo > 1e-6 ? `, per token ${st.lo.toFixed(3)} … ${st.hi.toFixed(3)}` : ''}
        {st.parts ? ` = outcome ${st.out.toFixed(3)} + process ${st.proc.toFixed(3)}` : ''})
      </span>
      {g ? (
        <span className="muted" data-testid="traj-group-stats">
          {' '}
          · group reward mean {g.mean.toFixed(3)}, std {g.std.toFixed(3)} (n {g.n})
        </span>
      ) : null}
    </span>
  );
}

/** A what-if replay: where it left its parent, with which edit and checkpoint; the parent one click away. */
function ForkOrigin({ traj }: { traj: Trajectory }) {
  const open = useArbor((s) => s.openTrajectoryById);
  const f = traj.fork!;
  return (
    <span data-testid="traj-fork-origin">
      <span className="branch-mark fork">
        <ForkIcon />
      </span>{' '}
      what-if replay of{' '}
      <a href="#" onClick={(e) => (e.preventDefault(), void open(f.parent))} data-testid="traj-fork-parent">
        trajectory {f.parent}
      </a>{' '}
      at turn {f.turn + 1}
      {f.token !== null ? `, token ${f.token}` : ''}
      {f.edit ? `, ${f.edit.kind} edited` : ''} · checkpoint {f.checkpoint.step !== undefined ? `step ${f.checkpoint.step}` : f.checkpoint.id}{' '}
      <span className="muted" data-testid="traj-fork-weights">
        ({weightsNote(f.checkpoint, traj)})
      </span>{' '}
      · T {f.sampling.temperature}
    </span>
  );
}

/** Retokenisation drift of the open trajectory, in a line (the drifted turns are marked in place). */
function DriftSummary({ traj }: { traj: Trajectory }) {
  const drift = useArbor((s) => s.drift);
  const err = useArbor((s) => s.driftError);
  if (err) return null;
  if (!drift) return null;
  return (
    <div className="muted" style={{ fontSize: 11 }} data-testid="drift-summary" data-drifted={drift.drifted ? 'true' : 'false'}>
      {drift.drifted
        ? `⚠ retokenisation drift in ${drift.turns.length} of ${drift.checked} turns (turn ${drift.turns.map((d) => d.turn + 1).join(', ')}): their ids differ from their text re-rendered by the run's tokenizer`
        : `no retokenisation drift: the ids of all ${drift.checked} turns of trajectory ${traj.id} equal their text re-rendered`}
    </div>
  );
}

/** Whether any token of the trajectory has a value on this channel. */
function hasChannel(t: Trajectory, c: Channel): boolean {
  return t.turnsData.some((u) => u.tokens.some((_, i) => channelValue(u, c, i) != null));
}

function TrajectoryHeader({ traj, tree }: { traj: Trajectory; tree: BranchTree | null }) {
  const list = useArbor((s) => s.trajList);
  const sibs = siblingsOf(list, traj);
  return (
    <div className="panel" style={{ display: 'flex', gap: 14, flexWrap: 'wrap', alignItems: 'baseline' }} data-testid="traj-header">
      <span>
        step <b className="mono">{stepLabel(traj.step)}</b>
      </span>
      {traj.fork ? (
        // A what-if child is not one of the group's samples: its own label, not "sample 0 of 8".
        <span data-testid="traj-fork-label">
          <b>what-if fork</b> · continuation <b className="mono">{traj.fork.sampling.index + 1}</b> of {traj.fork.sampling.n}
        </span>
      ) : (
        <span>
          group <b className="mono">{traj.group}</b> · sample <b className="mono">{traj.sample}</b> of {sibs.length}
        </span>
      )}
      <span>
        reward{' '}
        <b className="mono" data-testid="traj-reward">
          {traj.reward.toFixed(4)}
        </b>
      </span>
      {Object.entries(traj.rewardBreakdown).map(([k, v]) => (
        <span key={k} className="muted">
          {k} <span className="mono">{Number(v).toFixed(3)}</span>
        </span>
      ))}
      <AdvantageSummary traj={traj} />
      {traj.outcome ? <span className="tag">{traj.outcome}</span> : null}
      {traj.branch ? (
        <span data-testid="traj-branch">
          <span className="branch-mark fork">
            <ForkIcon />
          </span>{' '}
          branched from sample <b className="mono">{traj.branch.parent}</b> after turn {traj.branch.turn} <BranchPointBadge branch={traj.branch} />
        </span>
      ) : tree ? (
        <span className="muted" data-testid="traj-branch">
          root sample · {tree.byId.get(traj.id)?.children.length ?? 0} branch(es) taken from it
        </span>
      ) : null}
      {traj.fork ? <ForkOrigin traj={traj} /> : null}
      {traj.task ? <span className="muted">task {traj.task}</span> : null}
      <span className="muted mono" style={{ fontSize: 11 }}>
        {traj.id}
      </span>
    </div>
  );
}

function TrajectoryPane({ traj, channel, tree }: { traj: Trajectory; channel: Channel; tree: BranchTree | null }) {
  const turnIndex = useArbor((s) => s.turnIndex);
  const driftReport = useArbor((s) => s.drift);
  const cursor = useArbor((s) => s.cursor);
  const setCursor = useArbor((s) => s.setCursor);
  const autoRange = useArbor((s) => s.autoRange);
  const drift = useMemo(() => {
    const m = new Map<number, TurnDrift>();
    if (driftReport) for (const d of driftReport.turns) m.set(d.turn, d);
    return m;
  }, [driftReport]);
  const origins = useMemo(() => (tree && traj.branch ? turnOrigins(traj, tree) : undefined), [traj, tree]);
  return (
    <>
      <TrajectoryHeader traj={traj} tree={tree} />
      <VerdictStrip traj={traj} />
      <DriftSummary traj={traj} />
      <div className="replay-body">
        <div className="turns-col">
          <TurnList
            traj={traj}
            channel={channel}
            turnIndex={turnIndex}
            height="max(300px, calc(100vh - 420px))"
            origins={origins}
            drift={drift}
            cursor={cursor}
            setCursor={setCursor}
            autoRange={autoRange}
          />
        </div>
        <TokenInspector traj={traj} />
      </div>
      <ForkPanel key={traj.id} traj={traj} />
    </>
  );
}

/** The turns of one trajectory, virtualised by rows (see buildRows), with the token hover card. */
export function TurnList({
  traj,
  channel,
  turnIndex,
  height,
  origins,
  drift,
  cursor = null,
  setCursor,
  autoRange = false,
}: {
  /** The heat map scaled by this trajectory's own range (the view's "auto range"). */
  autoRange?: boolean;
  /** The keyboard token cursor, and what a click on a token does (moves it). */
  cursor?: TokenCursor | null;
  setCursor?: (c: TokenCursor) => void;
  traj: Trajectory;
  channel: Channel;
  turnIndex: number;
  height: string | number;
  /** Turns whose ids differ from their re-rendered text. */
  drift?: Map<number, TurnDrift>;
  /** Branch samples: which turns are shared with (and were generated by) an ancestor, and where the branch point is. */
  origins?: TurnOrigin[];
}) {
  const rows = useMemo(() => buildRows(traj), [traj]);
  const words = useMemo(() => isWordLevel(traj), [traj]);
  const scale = useMemo(() => channelScale(traj.turnsData, channel, (t) => (t as { tokens: string[] }).tokens.length, autoRange), [traj, channel, autoRange]);
  const steer = useMemo(() => steeringOf(traj), [traj]);
  const host = useRef<HTMLDivElement>(null);
  const virt = useVirtualizer({
    count: rows.length,
    getScrollElement: () => host.current,
    estimateSize: (i) => (rows[i].kind === 'head' ? 26 : 120),
    overscan: 6,
  });
  const [hover, setHover] = useState<{ turn: number; tok: number; x: number; y: number } | null>(null);

  useEffect(() => {
    const i = rows.findIndex((r) => r.kind === 'head' && r.turn === turnIndex);
    if (i >= 0) virt.scrollToIndex(i, { align: 'start' });
  }, [turnIndex, rows, virt]);

  return (
    <>
      <div
        ref={host}
        style={{ height, overflow: 'auto' }}
        data-testid="turns"
        onMouseOver={(e) => {
          const el = e.target as HTMLElement;
          if (el.dataset.tok) setHover({ turn: Number(el.dataset.turn), tok: Number(el.dataset.tok), x: e.clientX, y: e.clientY });
        }}
        onMouseLeave={() => setHover(null)}
        onClick={(e) => {
          const el = e.target as HTMLElement;
          if (el.dataset.tok && setCursor) setCursor({ turn: Number(el.dataset.turn), tok: Number(el.dataset.tok) });
        }}
      >
        <div style={{ height: virt.getTotalSize(), position: 'relative' }}>
          {virt.getVirtualItems().map((v) => {
            const row = rows[v.index];
            const turn = traj.turnsData[row.turn];
            const active = row.turn === turnIndex;
            return (
              <div
                key={v.key}
                ref={virt.measureElement}
                data-index={v.index}
                className={`turn ${active ? 'active' : ''} ${origins?.[row.turn]?.shared ? 'shared' : ''}`}
                data-testid={row.kind === 'head' ? 'turn' : undefined}
                data-turn-index={row.kind === 'head' ? row.turn : undefined}
                data-active={row.kind === 'head' && active ? 'true' : undefined}
                style={{
                  position: 'absolute',
                  top: 0,
                  left: 0,
                  right: 0,
                  transform: `translateY(${v.start}px)`,
                  margin: 0,
                  borderRadius: 0,
                  paddingTop: row.kind === 'head' ? 6 : 0,
                }}
              >
                {row.kind === 'head' ? (
                  <TurnHead
                    turn={turn}
                    index={row.turn}
                    origin={origins?.[row.turn]}
                    drift={drift?.get(row.turn)}
                    processRewards={traj.signal?.processRewards}
                    edited={steer.edited.get(row.turn)}
                    forcedCount={steer.forced.get(row.turn)?.size}
                  />
                ) : null}
                {row.kind === 'tokens' ? (
                  <TokenSpan
                    turn={turn}
                    turnIndex={row.turn}
                    from={row.from}
                    to={row.to}
                    channel={channel}
                    scale={scale}
                    words={words}
                    cursor={cursor && cursor.turn === row.turn && cursor.tok >= row.from && cursor.tok < row.to ? cursor.tok : -1}
                    forced={steer.forced.get(row.turn)}
                  />
                ) : null}
                {row.kind === 'text' ? <div className="tokens">{turn.text}</div> : null}
                {row.kind === 'calls' ? <ToolCalls calls={turn.toolCalls} staleNote={steer.staleCalls.get(row.turn)} /> : null}
              </div>
            );
          })}
        </div>
      </div>
      {hover && traj.turnsData[hover.turn] ? <TokenHoverCard turn={traj.turnsData[hover.turn]} index={hover.tok} x={hover.x} y={hover.y} /> : null}
    </>
  );
}

/** Length of the token prefix every sample of the group shares (the prompt, at least). */
export function sharedPrefix(group: Trajectory[]): number {
  if (!group.length) return 0;
  const flat = group.map((g) => g.turnsData.flatMap((u) => u.tokenIds));
  const n = Math.min(...flat.map((f) => f.length));
  let p = 0;
  while (p < n && flat.every((f) => f[p] === flat[0]![p])) p++;
  return p;
}

const COLUMN = 320;

/**
 * All samples of the prompt side by side, aligned: the prefix they share is collapsed into one
 * line (the prompt and any common opening), each column starts where its sample leaves the
 * others, with that first divergent token marked. The header has the group's reward mean and
 * std. Columns are virtualised (only the visible ones exist in the DOM).
 */
function GroupPane() {
  const group = useArbor((s) => s.group);
  const traj = useArbor((s) => s.traj);
  const channel = useArbor((s) => s.channel);
  const openById = useArbor((s) => s.openTrajectoryById);
  const auto = useArbor((s) => s.autoRange);
  const scale = useMemo(
    () =>
      channelScale(
        group.flatMap((g) => g.turnsData),
        channel,
        (t) => (t as { tokens: string[] }).tokens.length,
        auto,
      ),
    [group, channel, auto],
  );
  const words = useMemo(() => group.some(isWordLevel), [group]);
  const prefix = useMemo(() => sharedPrefix(group), [group]);
  const mean = group.length ? group.reduce((a, g) => a + g.reward, 0) / group.length : 0;
  const std = group.length > 1 ? Math.sqrt(group.reduce((a, g) => a + (g.reward - mean) ** 2, 0) / (group.length - 1)) : 0;
  const host = useRef<HTMLDivElement>(null);
  const virt = useVirtualizer({ horizontal: true, count: group.length, getScrollElement: () => host.current, estimateSize: () => COLUMN, overscan: 3 });
  const prefixText = useMemo(() => {
    const g = group[0];
    if (!g) return '';
    const toks = g.turnsData.flatMap((u) => u.tokens).slice(0, prefix);
    const tail = toks.slice(-12).join(words ? ' ' : '');
    return tail.length < toks.join('').length ? `… ${tail}` : tail;
  }, [group, prefix, words]);
  // The samples whose reward is not the group's most common one (the odd one out: the one success
  // among failures, or the reverse): marked in the jump strip, since 8 columns do not fit on screen.
  const odd = useMemo(() => oddSamples(group.map((g) => g.reward)), [group]);
  const selIndex = group.findIndex((g) => g.id === traj?.id);
  // The open sample's column is scrolled into view when the group opens or the sample changes.
  useEffect(() => {
    if (selIndex >= 0) virt.scrollToIndex(selIndex, { align: 'auto' });
  }, [selIndex, group.length, virt]);
  // A trajectory is always in its own group: an empty one is still loading (not "0 samples, prefix 0").
  if (!group.length) return <div className="panel muted">loading the group's samples…</div>;
  return (
    <div style={{ display: 'flex', flexDirection: 'column', gap: 6, minWidth: 0 }}>
      <div className="panel" data-testid="group-stats" style={{ fontSize: 12 }}>
        {group.length} samples · reward mean <b className="mono">{mean.toFixed(3)}</b> · std <b className="mono">{std.toFixed(3)}</b>
        {std === 0 && group.length > 1 ? <span className="flag">flat: no GRPO signal</span> : null} · shared prefix{' '}
        <b className="mono" data-testid="group-prefix-tokens">
          {prefix}
        </b>{' '}
        tokens, collapsed: <span className="mono muted">{prefixText}</span>
      </div>
      <JudgePanel group={group} />
      <div className="toolbar group-jump" data-testid="group-jump" aria-label="scroll to a sample">
        {group.map((g, i) => (
          <button
            key={g.id}
            className={`tag${odd.has(i) ? ' odd' : ''}${g.id === traj?.id ? ' active' : ''}`}
            data-testid="group-jump-sample"
            data-odd={odd.has(i) ? 'true' : undefined}
            title={odd.has(i) ? 'reward unlike the rest of the group' : undefined}
            onClick={() => virt.scrollToIndex(i, { align: 'center' })}
          >
            {g.sample}: {g.reward.toFixed(2)}
            {odd.has(i) ? ' ◆' : ''}
          </button>
        ))}
      </div>
      <div
        ref={host}
        className="group-grid"
        data-testid="group-view"
        tabIndex={0}
        role="region"
        aria-label={`${group.length} samples of the group, side by side`}
        style={{ overflowX: 'auto', position: 'relative', height: 'calc(100vh - 290px)', display: 'block' }}
      >
        <div style={{ width: virt.getTotalSize(), height: '100%', position: 'relative' }}>
          {virt.getVirtualItems().map((v) => {
            const g = group[v.index]!;
            let offset = 0;
            return (
              <div
                key={g.id}
                className={`group-col ${g.id === traj?.id ? 'sel' : ''}${odd.has(v.index) ? ' odd' : ''}`}
                onClick={() => void openById(g.id)}
                onKeyDown={(e) => e.key === 'Enter' && void openById(g.id)}
                tabIndex={0}
                role="group"
                aria-label={`sample ${g.sample}, reward ${g.reward.toFixed(3)}`}
                data-testid="group-col"
                style={{ position: 'absolute', top: 0, left: v.start, width: COLUMN - 8, height: '100%', overflowY: 'auto' }}
              >
                <div className="turn-head">
                  <b>sample {g.sample}</b>
                  <span>
                    reward <b className="mono">{g.reward.toFixed(3)}</b>
                  </span>
                  <span>
                    adv{' '}
                    <b className="mono" style={{ color: (g.advantage ?? g.reward - mean) >= 0 ? 'var(--ok)' : 'var(--err)' }}>
                      {(g.advantage ?? g.reward - mean).toFixed(3)}
                    </b>
                  </span>
                  {g.outcome ? <span className="tag">{g.outcome}</span> : null}
                  {judgeOf(g) ? <JudgeBadge judge={judgeOf(g)!} /> : null}
                  {g.branch ? (
                    <span
                      title={`branched from sample ${g.branch.parent} after turn ${g.branch.turn} (entropy ${g.branch.entropy.toFixed(3)}, ΔH ${g.branch.deltaH.toFixed(3)})`}
                    >
                      <span className="branch-mark fork">
                        <ForkIcon />
                      </span>{' '}
                      from {g.branch.parent}
                    </span>
                  ) : null}
                </div>
                <div className="group-prefix">⋯ {prefix} shared tokens</div>
                {g.turnsData.map((t, i) => {
                  const start = offset;
                  offset += t.tokenIds.length;
                  if (offset <= prefix && t.tokenIds.length > 0) return null;
                  const from = Math.max(0, prefix - start);
                  return (
                    <div key={i} className="turn">
                      <TurnHead turn={t} index={i} processRewards={g.signal?.processRewards} />
                      {t.tokens.length ? (
                        <TokenSpan
                          turn={t}
                          turnIndex={i}
                          from={from}
                          to={Math.min(t.tokens.length, from + 2048)}
                          channel={channel}
                          scale={scale}
                          words={words}
                          diverge={start <= prefix && prefix < offset ? prefix - start : -1}
                        />
                      ) : (
                        <div className="tokens">{t.text}</div>
                      )}
                      {t.toolCalls.length ? <ToolCalls calls={t.toolCalls} /> : null}
                    </div>
                  );
                })}
              </div>
            );
          })}
        </div>
      </div>
    </div>
  );
}
