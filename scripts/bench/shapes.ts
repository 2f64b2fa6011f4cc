/** Released models' shapes for the benchmarks (scripts/bench): the one list is engine/model/shapes.ts (also `arbor plan --shape`). */
import type { ModelConfig } from '../../engine/model/config';
import { SMALL_SHAPES } from '../../engine/model/shapes';

export { SHAPES, SMALL_SHAPES, ALL_SHAPES, shapeByName } from '../../engine/model/shapes';

/** The decode benchmarks' two model sizes (bench:rollout, bench:quant): the tiny task model and the 25M shape of issue #29. */
export const DECODE_MODELS: { name: string; config: ModelConfig }[] = [
  { name: 'tiny', config: SMALL_SHAPES.tiny },
  { name: '25M', config: SMALL_SHAPES['25m'] },
];
