/**
 * The built-in task kinds. Each kit module registers itself (registerTaskKit) with everything about
 * its kind, exactly as a plugin does; this list only loads them (engine/builtins.ts loads every
 * registry's list).
 *
 *  multihop  the built-in synthetic multi-hop world with BM25 search (./multihop/)
 *  qa        a QA dataset (HotpotQA style) whose contexts are the search corpus (./qa/)
 *  custom    a task file of {id, prompt | messages, answers?, meta?} and your own tools (./custom/)
 *  tools     the built-in two-tool task (lookup + calculator in Hermes JSON) over resources/examples/tools-task (./tools/)
 */
import './multihop/kit';
import './qa/kit';
import './custom/kit';
import './tools/kit';
