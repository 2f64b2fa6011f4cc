/**
 * Local search: BM25 ranking (wink-bm25-text-search) over a passage corpus, with top-k and
 * passage truncation, exposed as a Tool.
 */
import { createRequire } from 'node:module';
import type { Tool } from './tool';

const require = createRequire(import.meta.url);
const bm25 = require('wink-bm25-text-search') as () => {
  defineConfig(c: { fldWeights: Record<string, number>; bm25Params?: Record<string, number> }): void;
  definePrepTasks(t: ((s: string) => string[])[]): void;
  addDoc(doc: Record<string, string>, id: string | number): void;
  consolidate(): void;
  search(q: string, limit?: number): [string, number][];
};

export interface Passage {
  id: string;
  title: string;
  text: string;
}

const tokenize = (s: string): string[] => s.toLowerCase().match(/[a-z0-9]+/g) ?? [];

export class Bm25Index {
  private engine = bm25();
  private byId = new Map<string, Passage>();
  constructor(passages: Passage[]) {
    if (passages.length < 3) throw new Error(`search corpus needs at least 3 passages, got ${passages.length}`);
    this.engine.defineConfig({ fldWeights: { title: 2, text: 1 }, bm25Params: { k1: 1.2, b: 0.75, k: 1 } });
    this.engine.definePrepTasks([tokenize]);
    for (const p of passages) {
      this.byId.set(p.id, p);
      this.engine.addDoc({ title: p.title, text: p.text }, p.id);
    }
    this.engine.consolidate();
  }
  search(query: string, k: number): { passage: Passage; score: number }[] {
    if (tokenize(query).length === 0) return [];
    return this.engine.search(query, k).map(([id, score]) => ({ passage: this.byId.get(String(id))!, score }));
  }
  get size(): number {
    return this.byId.size;
  }
}

export function searchTool(index: Bm25Index, opts: { topK?: number; maxPassageChars?: number } = {}): Tool {
  const topK = opts.topK ?? 2;
  const maxChars = opts.maxPassageChars ?? 300;
  return {
    name: 'search',
    description: 'search the encyclopedia for passages about a query',
    parameters: { type: 'object', properties: { query: { type: 'string', minLength: 1, maxLength: 200 } }, required: ['query'], additionalProperties: false },
    execute(args) {
      const hits = index.search(String(args.query), topK);
      if (hits.length === 0) return { content: 'no results', success: true, metadata: { passages: [] } };
      const texts = hits.map((h) => (h.passage.text.length > maxChars ? `${h.passage.text.slice(0, maxChars)} …` : h.passage.text));
      return { content: texts.join(' '), success: true, metadata: { passages: hits.map((h) => h.passage.id), texts } };
    },
  };
}
