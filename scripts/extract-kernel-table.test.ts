import { describe, expect, it } from 'vitest';
import { loadCudaKernelTable } from '@sqlenv/onnx-graph';
import { buildKernelTable, parseOnnxVersions, parseOperatorKernels } from './extract-kernel-table.ts';

// Rows in the published format of onnxruntime's docs/OperatorKernels.md (two ops, CPU and CUDA sections).
const KERNELS = [
  '## Operators implemented by CPUExecutionProvider',
  '|**Operator Domain:** *ai.onnx*||||',
  '|Where|*in* condition:**B**<br> *in* X:**T**<br> *in* Y:**T**<br> *out* output:**T**|16+|**T** = tensor(bool), tensor(float)|',
  '## Operators implemented by CUDAExecutionProvider',
  '| Op Name | Parameters | OpSet Version | Types Supported |',
  '|---------|------------|---------------|-----------------|',
  '|**Operator Domain:** *ai.onnx*||||',
  '|Where|*in* condition:**B**<br> *in* X:**T**<br> *in* Y:**T**<br> *out* output:**T**|16+|**B** = tensor(bool)<br/> **T** = tensor(bfloat16), tensor(double), tensor(float), tensor(float16), tensor(int32), tensor(int64), tensor(uint8)|',
  '|||[9, 15]|**B** = tensor(bool)<br/> **T** = tensor(double), tensor(float), tensor(float16), tensor(int32), tensor(int64), tensor(uint8)|',
  '|Reshape|*in* data:**T**<br> *in* shape:**tensor(int64)**<br> *out* reshaped:**T**<br><br>or<br><br>*in* data:**T**<br> *out* reshaped:**T**|23+|**T** = tensor(bool), tensor(float)<br/> **shape** = tensor(int64)|',
  '|||[14, 18]|**T** = tensor(bfloat16), tensor(bool), tensor(float)<br/> **shape** = tensor(int64)|',
  '|**Operator Domain:** *com.microsoft*||||',
  '|Attention|*in* input:**T**<br> *out* output:**T**|1+|**T** = tensor(float)|',
].join('\n');

const OPERATORS = [
  '### <a name="Where"></a><a name="where">**Where**</a>',
  'This version of the operator has been available since version 16 of the default ONNX operator set.',
  'Other versions of this operator: <a href="Changelog.md#Where-9">9</a>',
  '### <a name="Reshape"></a><a name="reshape">**Reshape**</a>',
  'This version of the operator has been available since version 25 of the default ONNX operator set.',
  'Other versions of this operator: <a href="#Reshape-1">1</a>, <a href="#Reshape-5">5</a>, <a href="#Reshape-13">13</a>, <a href="#Reshape-14">14</a>, <a href="#Reshape-19">19</a>',
  '### <a name="Xor"></a>',
].join('\n');

describe('extract-kernel-table', () => {
  it('reads the CUDA rows of the ai.onnx domain, with ranges, parameters and types', () => {
    const rows = parseOperatorKernels(KERNELS, 'CUDAExecutionProvider');
    expect(rows.map((r) => [r.op, r.since, r.until])).toEqual([
      ['Where', 16, null],
      ['Where', 9, 15],
      ['Reshape', 23, null],
      ['Reshape', 14, 18],
    ]);
    expect(rows[0]).toMatchObject({ inputs: ['B', 'T', 'T'], outputs: ['T'], types: { B: ['bool'], T: ['bfloat16', 'double', 'float', 'float16', 'int32', 'int64', 'uint8'] } });
    expect(rows[3]).toMatchObject({ inputs: ['T', '=int64'], types: { T: ['bfloat16', 'bool', 'float'] } });
  });

  it('builds table entries that agree with the shipped table for the same rows', () => {
    const versions = parseOnnxVersions(OPERATORS, ['Where', 'Reshape']);
    expect(versions).toEqual({ Where: [9, 16], Reshape: [1, 5, 13, 14, 19, 25] });
    const built = buildKernelTable(parseOperatorKernels(KERNELS, 'CUDAExecutionProvider'), versions, {});
    const shipped = loadCudaKernelTable();
    expect(built.ops['Where']?.kernel).toEqual(shipped.ops['Where']?.kernel);
    expect(built.ops['Reshape']?.kernel).toMatchObject({ since: 14, until: 18, inputs: ['T', '=int64'] });
    expect(built.ops['Constant']).toMatchObject({ kernel: null });
  });
});
