/** `--device` of the model commands (generate, rollout, eval): one of the config's devices. */
import { DEVICES } from '../config/experiment';

export { DEVICES };

export function deviceOption(v: string): (typeof DEVICES)[number] {
  if (!(DEVICES as readonly string[]).includes(v)) throw new Error(`--device must be one of ${DEVICES.join(', ')} (got "${v}")`);
  return v as (typeof DEVICES)[number];
}
