// Types of bin/node-check.mjs for the test that imports it.
export declare const SUPPORTED_NODE: string;
export declare function nodeVersionProblem(version: string): string | null;
