// Runs related by parent_id: a fork's origin, or the run that recorded an RL run's SFT warm start
// (engine/run/store-sink.ts openSftRun: template "sft", tag "sft-warm-start").

/** Whether a run records another run's SFT warm start (the RL run that began from it is its child). */
export function isSftWarmStart(r: { template?: string | null; tags: string[] } | null | undefined): boolean {
  return !!r && r.template === 'sft' && r.tags.includes('sft-warm-start');
}
