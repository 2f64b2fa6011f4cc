/**
 * The built-in advantage estimators and policy losses. Each module registers itself with
 * everything about it (options, the shared keys it reads, verl mapping, heat-map signals), exactly
 * as a plugin does; this list only loads them (engine/builtins.ts loads every registry's list).
 */
import './advantage/grpo';
import './advantage/drgrpo';
import './advantage/rloo';
import './advantage/reinforce-pp';
import './advantage/reinforce-pp-baseline';
import './advantage/gae';
import './advantage/gigpo';
import './loss/ppo';
import './loss/gspo';
import './loss/aepo';
