/** A tiny model folder with the two-tool task's tokenizer and chat template (Hermes tool calls), for the endpoint's tests. */
import { copyFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { initWeights, saveCheckpoint } from '../../../engine/model/checkpoint';
import { tinyConfig } from '../../../engine/model/config';
import { toolsTokenizer } from '../../../engine/tasks/tools/kit';

export function toolsModelFolder(folder: string, seed = 0): void {
  const tok = toolsTokenizer();
  mkdirSync(folder, { recursive: true });
  for (const f of ['tokenizer.json', 'tokenizer_config.json']) copyFileSync(join(tok.folder(), f), join(folder, f));
  const config = tinyConfig({
    vocabSize: tok.vocab.length,
    hiddenSize: 32,
    layers: 1,
    heads: 4,
    maxPositionEmbeddings: 512,
    eosTokenId: tok.hf.tokenId('<|im_end|>')!,
    padTokenId: tok.hf.padTokenId,
    bosTokenId: null,
  });
  saveCheckpoint(folder, config, initWeights(config, seed));
}

export const TOOLS = [
  {
    type: 'function' as const,
    function: {
      name: 'lookup',
      description: 'the fact about an organisation or a person',
      parameters: { type: 'object', properties: { entity: { type: 'string' } }, required: ['entity'] },
    },
  },
  {
    type: 'function' as const,
    function: {
      name: 'calculator',
      description: 'evaluate arithmetic',
      parameters: { type: 'object', properties: { expression: { type: 'string' } }, required: ['expression'] },
    },
  },
];
