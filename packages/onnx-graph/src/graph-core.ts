import { DTYPE_SIZE_BYTES, ONNX_DTYPE_CODE, type DType } from './dtype.ts';
import { IR_VERSION, OPSET, type OpType } from './ops.ts';
import type { AttributeProto, GraphProto, ModelProto, NodeProto, TensorProto, ValueInfoProto } from './onnx-proto.ts';
import { formatShape, graphError, isStaticShape, type Dim, type Shape } from './shape.ts';
import { elementCount, tensor, tensorBytes, type TensorData } from './tensor-data.ts';

/** A node attribute value; `attr.*` builds them. */
export type AttrValue =
  | { readonly kind: 'int'; readonly value: number }
  | { readonly kind: 'float'; readonly value: number }
  | { readonly kind: 'string'; readonly value: string }
  | { readonly kind: 'ints'; readonly value: readonly number[] }
  | { readonly kind: 'floats'; readonly value: readonly number[] }
  | { readonly kind: 'tensor'; readonly value: TensorData }
  | { readonly kind: 'graph'; readonly value: GraphCore };

export const attr = {
  int: (value: number): AttrValue => ({ kind: 'int', value }),
  float: (value: number): AttrValue => ({ kind: 'float', value }),
  string: (value: string): AttrValue => ({ kind: 'string', value }),
  ints: (value: readonly number[]): AttrValue => ({ kind: 'ints', value }),
  floats: (value: readonly number[]): AttrValue => ({ kind: 'floats', value }),
  tensor: (value: TensorData): AttrValue => ({ kind: 'tensor', value }),
  graph: (value: GraphCore): AttrValue => ({ kind: 'graph', value }),
} as const;

export type Attrs = Readonly<Record<string, AttrValue>>;

/** A symbolic tensor: one value in a graph, with its inferred dtype and shape. */
export class Tensor {
  /** @internal set by GraphCore when the tensor becomes a named graph output. */
  nameInternal: string;

  constructor(
    readonly id: number,
    name: string,
    readonly dtype: DType,
    readonly shape: Shape,
    readonly graph: GraphCore,
    readonly producer: GraphNode | undefined,
    readonly outputIndex: number,
    /** The value, when the tensor is a Constant node's output (rules and builders read it). */
    readonly constValue?: TensorData,
  ) {
    this.nameInternal = name;
  }

  get name(): string {
    return this.nameInternal;
  }

  get rank(): number {
    return this.shape.length;
  }

  toString(): string {
    return `'${this.name}' ${this.dtype}${formatShape(this.shape)}`;
  }
}

/** A stretch of forward nodes that `gradients()` recomputes in the backward pass instead of keeping. */
export interface CheckpointRegion {
  /** The region's nodes in creation order. */
  readonly nodes: readonly GraphNode[];
  /** The region's result (the checkpoint Identity's input). */
  readonly output: Tensor;
}

export interface GraphNode {
  readonly id: number;
  readonly name: string;
  readonly opType: OpType;
  /** null = an omitted optional input (written as ''). */
  readonly inputs: readonly (Tensor | null)[];
  readonly outputs: readonly Tensor[];
  readonly attrs: Attrs;
}

export interface TensorSpec {
  readonly dtype: DType;
  readonly shape: Shape;
}

export interface ValueSpec extends TensorSpec {
  readonly name: string;
}

export interface InitializerOptions {
  /** Store this tensor as external data (default: decided by `toModel`'s `externalData`). */
  external?: boolean;
}

export interface ExternalDataFile {
  /** The `location` written in the TensorProto; pass it with the bytes to ONNX Runtime. */
  readonly path: string;
  readonly data: Uint8Array;
}

export interface ToModelOptions {
  /** Pinned: only 17 is accepted (default 17). */
  opset?: number;
  /**
   * 'auto' (default): when inline initializers would total more than `inlineLimitBytes`,
   * every initializer of at least 1 MiB goes to external data (protobuf caps a message at 2 GiB).
   * 'none': everything inline unless marked `external`. 'all': every initializer external.
   */
  externalData?: 'auto' | 'none' | 'all';
  /** Inline initializer budget for 'auto', in bytes (default 1 GiB). */
  inlineLimitBytes?: number;
  graphName?: string;
  producerName?: string;
  docString?: string;
}

/** A built model: the ModelProto, external data to hand to the runtime, and the graph's signature. */
export interface BuiltModel {
  readonly proto: ModelProto;
  readonly externalData: readonly ExternalDataFile[];
  readonly inputs: readonly ValueSpec[];
  readonly outputs: readonly ValueSpec[];
}

const MODEL_DEFAULTS = {
  inlineLimitBytes: 2 ** 30,
  externalMinBytes: 2 ** 20,
  graphName: 'main',
  producerName: '@sqlenv/onnx-graph',
} as const;

/** State shared by a root graph and all its subgraphs: ids and names are unique model-wide. */
class RootState {
  nextId = 0;
  readonly names = new Set<string>();
}

interface InitializerEntry {
  readonly tensor: Tensor;
  readonly data: TensorData;
  readonly external: boolean | undefined;
}

const NAME_RE = /^[A-Za-z_][A-Za-z0-9_.:/-]*$/;

/**
 * Storage and serialisation of a graph: tensors, nodes, inputs, initializers,
 * outputs, constants and run-time values of symbolic dims. The op methods
 * live in `Graph` (graph.ts), which extends this class.
 */
export abstract class GraphCore {
  readonly nodes: GraphNode[] = [];
  readonly inputs: Tensor[] = [];
  readonly outputs: Tensor[] = [];
  protected readonly initializerEntries: InitializerEntry[] = [];
  private readonly root: RootState;
  /** Where each symbolic dim can be read at run time: first tensor seen carrying it. */
  private readonly dimCarriers = new Map<string, { tensor: Tensor; axis: number }>();
  private readonly dimTensors = new Map<string, Tensor>();
  /** Ids of the Identity nodes made by `stopGradient`: autodiff passes no gradient through them. */
  readonly stopGradientNodes = new Set<number>();
  /** Identity nodes made by `checkpoint` (autodiff.ts), by id: the region whose backward recomputes it. */
  readonly checkpointNodes = new Map<number, CheckpointRegion>();

  constructor(readonly parent?: GraphCore) {
    this.root = parent ? parent.root : new RootState();
  }

  get initializers(): readonly { readonly tensor: Tensor; readonly data: TensorData }[] {
    return this.initializerEntries;
  }

  // ---- values -----------------------------------------------------------------------------

  /** A graph input. Symbolic dims (strings) become `dim_param`s and can be used by later ops. */
  input(name: string, dtype: DType, shape: Shape): Tensor {
    const t = this.newTensor(this.claimName(name), dtype, shape, undefined, 0);
    this.inputs.push(t);
    return t;
  }

  /** A weight stored in the model (inline, or as external data; see `ToModelOptions.externalData`). */
  initializer(name: string, data: TensorData, options: InitializerOptions = {}): Tensor {
    if (data.data.length !== elementCount(data.dims)) {
      throw graphError(`initializer '${name}': expected ${elementCount(data.dims)} values for dims [${data.dims.join(', ')}], got ${data.data.length}`);
    }
    const t = this.newTensor(this.claimName(name), data.dtype, [...data.dims], undefined, 0);
    this.initializerEntries.push({ tensor: t, data, external: options.external });
    return t;
  }

  /** Mark `t` as a graph output named `name`. Returns the output tensor. */
  output(name: string, t: Tensor): Tensor {
    this.assertVisible(t, `output '${name}'`);
    const renamable = t.graph === this && t.producer !== undefined && !this.outputs.includes(t) && t.producer.opType !== 'Constant';
    if (renamable) {
      this.root.names.delete(t.name);
      t.nameInternal = this.claimName(name);
      this.outputs.push(t);
      return t;
    }
    const [out] = this.addNode('Identity', [t], {}, [{ dtype: t.dtype, shape: t.shape }], name);
    if (!out) throw graphError('Identity produced no output');
    this.outputs.push(out);
    return out;
  }

  /**
   * The same values, seen by `gradients()` as a constant (PyTorch's `detach`, JAX's `stop_gradient`):
   * an Identity node the autodiff does not differentiate through. For quantities a loss uses as
   * weights, such as a policy-gradient ratio's denominator.
   */
  stopGradient(t: Tensor): Tensor {
    this.assertVisible(t, 'stopGradient');
    const [out] = this.addNode('Identity', [t], {}, [{ dtype: t.dtype, shape: t.shape }]);
    if (!out?.producer) throw graphError('Identity produced no output');
    this.stopGradientNodes.add(out.producer.id);
    return out;
  }

  /** A constant tensor (a Constant node; works the same inside subgraphs). */
  constant(data: TensorData): Tensor {
    const id = this.root.nextId++;
    const name = this.uniqueName(`const_${id}`);
    const node: GraphNode = { id, name: `Constant_${id}`, opType: 'Constant', inputs: [], outputs: [], attrs: { value: attr.tensor(data) } };
    const t = this.newTensor(name, data.dtype, [...data.dims], node, 0, data);
    (node.outputs as Tensor[]).push(t);
    this.nodes.push(node);
    return t;
  }

  /** A rank-0 constant. */
  scalar(value: number, dtype: DType = 'float32'): Tensor {
    return this.constant(tensor(dtype, [], [value]));
  }

  /** A 1-D int64 constant (axes, shapes, starts/ends). */
  ints(values: readonly number[]): Tensor {
    return this.constant(tensor('int64', [values.length], values));
  }

  // ---- nodes ------------------------------------------------------------------------------

  /**
   * Low-level: append a node with already inferred output types. Op methods
   * (graph.ts) infer and check shapes, then call this.
   */
  addNode(opType: OpType, inputs: readonly (Tensor | null)[], attrs: Attrs, outputs: readonly TensorSpec[], outputName?: string): Tensor[] {
    for (const t of inputs) if (t) this.assertVisible(t, opType);
    const id = this.root.nextId++;
    const node: GraphNode = { id, name: `${opType}_${id}`, opType, inputs: [...inputs], outputs: [], attrs };
    const outs = outputs.map((spec, i) => {
      const name = i === 0 && outputName !== undefined ? this.claimName(outputName) : this.uniqueName(`${opType.toLowerCase()}_${id}${outputs.length > 1 ? `_${i}` : ''}`);
      return this.newTensor(name, spec.dtype, spec.shape, node, i);
    });
    (node.outputs as Tensor[]).push(...outs);
    this.nodes.push(node);
    return outs;
  }

  /** Throw unless `t` belongs to this graph or an enclosing one (ONNX outer-scope references). */
  assertVisible(t: Tensor, where: string): void {
    if (this.scopes().includes(t.graph)) return;
    throw graphError(`${where}: tensor ${t.toString()} belongs to a different graph (expected this graph or an enclosing one)`);
  }

  // ---- symbolic dims ---------------------------------------------------------------------

  /** An int64 scalar-shaped [1] tensor holding the run-time value of one dim. */
  dimTensor(dim: Dim): Tensor {
    if (typeof dim === 'number') return this.ints([dim]);
    const cached = this.dimTensors.get(dim);
    if (cached) return cached;
    let result: Tensor | undefined;
    const carrier = this.findCarrier(dim);
    if (carrier) {
      const shapeOp = this.addNode('Shape', [carrier.tensor], { start: attr.int(carrier.axis), end: attr.int(carrier.axis + 1) }, [{ dtype: 'int64', shape: [1] }]);
      result = shapeOp[0];
    } else if (dim.includes('*')) {
      // A product symbol ('B*T') not carried by any tensor: multiply its factors.
      const factors = dim.split('*');
      result = factors.map((f) => (/^\d+$/.test(f) ? this.ints([Number(f)]) : this.dimTensor(f))).reduce((a, b) => this.addNode('Mul', [a, b], {}, [{ dtype: 'int64', shape: [1] }])[0] ?? a);
    }
    if (!result) throw graphError(`symbolic dim '${dim}': expected a tensor in scope carrying it (an input or op output with that dim), got none`);
    this.dimTensors.set(dim, result);
    return result;
  }

  /** A 1-D int64 tensor with the run-time values of `dims` (a constant when all are static). */
  dimsTensor(dims: Shape): Tensor {
    if (isStaticShape(dims)) return this.ints(dims);
    const parts = dims.map((d) => this.dimTensor(d));
    return this.addNode('Concat', parts, { axis: attr.int(0) }, [{ dtype: 'int64', shape: [dims.length] }])[0] ?? this.ints([]);
  }

  private findCarrier(dim: string): { tensor: Tensor; axis: number } | undefined {
    for (const g of this.scopes()) {
      const c = g.dimCarriers.get(dim);
      if (c) return c;
    }
    return undefined;
  }

  /** This graph, then each enclosing graph out to the root. */
  private scopes(): GraphCore[] {
    const chain: GraphCore[] = [];
    for (let g = this.parent; g; g = g.parent) chain.push(g);
    return [this as GraphCore, ...chain];
  }

  // ---- naming ------------------------------------------------------------------------------

  /** A fresh symbolic dim name, unique in the model. */
  freshDim(hint: string): string {
    return this.uniqueName(`${hint}_${this.root.nextId++}`);
  }

  /** A name not yet used in the model (not reserved: pass it to `input`/`output` right away). */
  unusedName(base: string): string {
    let name = base;
    for (let i = 1; this.root.names.has(name); i++) name = `${base}_${i}`;
    return name;
  }

  /** Whether a symbolic dim can be read at run time from this graph (a carrier, or all factors of a product). */
  hasDim(dim: Dim): boolean {
    if (typeof dim === 'number') return true;
    if (this.findCarrier(dim)) return true;
    return dim.includes('*') && dim.split('*').every((f) => /^\d+$/.test(f) || this.findCarrier(f) !== undefined);
  }

  private claimName(name: string): string {
    if (!NAME_RE.test(name)) throw graphError(`name '${name}': expected letters, digits, '_', '.', ':', '/', '-' (not starting with a digit), got an invalid name`);
    if (this.root.names.has(name)) throw graphError(`name '${name}': expected a name unique in the model, got one already used`);
    this.root.names.add(name);
    return name;
  }

  private uniqueName(base: string): string {
    let name = base;
    for (let i = 1; this.root.names.has(name); i++) name = `${base}_${i}`;
    this.root.names.add(name);
    return name;
  }

  private newTensor(name: string, dtype: DType, shape: Shape, producer: GraphNode | undefined, index: number, constValue?: TensorData): Tensor {
    for (const d of shape) {
      if (typeof d === 'number' && (!Number.isInteger(d) || d < 0)) throw graphError(`tensor '${name}': expected non-negative integer dims, got ${formatShape(shape)}`);
    }
    const t = new Tensor(this.root.nextId++, name, dtype, [...shape], this, producer, index, constValue);
    shape.forEach((d, axis) => {
      if (typeof d === 'string' && !this.dimCarriers.has(d)) this.dimCarriers.set(d, { tensor: t, axis });
    });
    return t;
  }

  // ---- serialisation -------------------------------------------------------------------------

  /** The whole model: graph, opset import and external data. */
  toModel(options: ToModelOptions = {}): BuiltModel {
    if (this.parent) throw graphError('toModel: expected a root graph, got a subgraph');
    const opset = options.opset ?? OPSET;
    if (opset !== OPSET) throw graphError(`toModel: opset is pinned, expected ${OPSET}, got ${opset}`);
    if (this.outputs.length === 0) throw graphError('toModel: expected at least one output, got none');
    const mode = options.externalData ?? 'auto';
    const inlineBytes = this.initializerEntries.filter((e) => e.external !== true).reduce((s, e) => s + e.data.data.byteLength, 0);
    const auto = mode === 'auto' && inlineBytes > (options.inlineLimitBytes ?? MODEL_DEFAULTS.inlineLimitBytes);
    const externalData: ExternalDataFile[] = [];
    const isExternal = (e: InitializerEntry): boolean =>
      e.external ?? (mode === 'all' || (auto && e.data.data.byteLength >= MODEL_DEFAULTS.externalMinBytes));
    const proto: ModelProto = {
      irVersion: IR_VERSION,
      opsetImport: [{ domain: '', version: opset }],
      producerName: options.producerName ?? MODEL_DEFAULTS.producerName,
      producerVersion: '0.1.0',
      graph: this.toGraphProto(options.graphName ?? MODEL_DEFAULTS.graphName, isExternal, externalData),
      ...(options.docString === undefined ? {} : { docString: options.docString }),
    };
    const spec = (t: Tensor): ValueSpec => ({ name: t.name, dtype: t.dtype, shape: t.shape });
    return { proto, externalData, inputs: this.inputs.map(spec), outputs: this.outputs.map(spec) };
  }

  /** @internal GraphProto of this graph (subgraphs serialise through their parent's node attributes). */
  toGraphProto(name: string, isExternal: (e: InitializerEntry) => boolean = () => false, externalData: ExternalDataFile[] = []): GraphProto {
    const initializer = this.initializerEntries.map((e): TensorProto => {
      if (!isExternal(e)) return tensorProto(e.tensor.name, e.data);
      const path = `${e.tensor.name.replace(/[^A-Za-z0-9_.-]/g, '_')}.${externalData.length}.bin`;
      const data = tensorBytes(e.data);
      externalData.push({ path, data });
      return {
        name: e.tensor.name,
        dataType: ONNX_DTYPE_CODE[e.data.dtype],
        dims: [...e.data.dims],
        dataLocation: 'external',
        externalData: [
          { key: 'location', value: path },
          { key: 'offset', value: '0' },
          { key: 'length', value: String(data.byteLength) },
        ],
      };
    });
    return {
      name,
      node: this.nodes.map((n, i) => nodeProto(n, `${name}_${i}`)),
      initializer,
      input: this.inputs.map(valueInfo),
      output: this.outputs.map(valueInfo),
      valueInfo: [],
    };
  }

  /** Total bytes of this graph's initializers. */
  initializerBytes(): number {
    return this.initializerEntries.reduce((s, e) => s + elementCount(e.data.dims) * DTYPE_SIZE_BYTES[e.data.dtype], 0);
  }

  /** A readable dump of the nodes (one per line), for debugging and error messages. */
  describe(): string {
    return this.nodes
      .map((n) => `${n.outputs.map((o) => o.toString()).join(', ')} = ${n.opType}(${n.inputs.map((i) => (i ? i.name : '-')).join(', ')})`)
      .join('\n');
  }
}

function valueInfo(t: Tensor): ValueInfoProto {
  return { name: t.name, elemType: ONNX_DTYPE_CODE[t.dtype], shape: [...t.shape] };
}

function tensorProto(name: string, data: TensorData): TensorProto {
  return { name, dataType: ONNX_DTYPE_CODE[data.dtype], dims: [...data.dims], rawData: tensorBytes(data) };
}

function nodeProto(n: GraphNode, subgraphPrefix: string): NodeProto {
  const attribute = Object.entries(n.attrs).map(([name, a]): AttributeProto => {
    switch (a.kind) {
      case 'int':
        return { name, type: 'int', i: a.value };
      case 'float':
        return { name, type: 'float', f: a.value };
      case 'string':
        return { name, type: 'string', s: a.value };
      case 'ints':
        return { name, type: 'ints', ints: [...a.value] };
      case 'floats':
        return { name, type: 'floats', floats: [...a.value] };
      case 'tensor':
        return { name, type: 'tensor', t: tensorProto('', a.value) };
      case 'graph':
        return { name, type: 'graph', g: a.value.toGraphProto(`${subgraphPrefix}_${name}`) };
    }
  });
  return { name: n.name, opType: n.opType, domain: '', input: n.inputs.map((t) => (t ? t.name : '')), output: n.outputs.map((t) => t.name), attribute };
}
