/** The step selector's label: step −1 holds the playground's live rollouts (engine/playground/live.ts LIVE_STEP). */
export function stepLabel(step: number): string {
  return step === -1 ? '−1 (playground)' : String(step);
}
