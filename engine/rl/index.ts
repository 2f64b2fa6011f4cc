/**
 * engine/rl's public face for advantages: the estimator registry (./estimator-registry.ts), the
 * estimator formulas (./estimators.ts), and the built-in estimators and policy losses, which
 * register themselves from their own modules when ./builtins.ts is imported (here, so that every
 * reader of the registry finds them). `registerEstimator` adds one (a config's `plugins:` file
 * calls it; README "Write your own estimator").
 */
import './builtins';

export * from './estimators';
export * from './estimator-registry';
export { stepGroupMetrics } from './advantage/gigpo';
