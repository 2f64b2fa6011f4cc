import { traceGraph } from '../engine/tensor/graph';
import { toOnnx } from '../engine/tensor/onnx';
import { tinyConfig } from '../engine/model/config';
import { decodeInputSpecs, decodeProgram } from '../engine/model/graphs';
import * as O from 'onnxruntime-node';
const c = tinyConfig({ vocabSize: 40, hiddenSize: 32, layers: 2, heads: 4, kvHeads: 2, maxPositionEmbeddings: 64, padTokenId: 0 });
O.env.logLevel = 'verbose';
await O.InferenceSession.create(toOnnx(traceGraph(decodeInputSpecs(c), decodeProgram(c))), { executionProviders: ['webgpu'], logSeverityLevel: 0, graphOptimizationLevel: 'all' } as never);
