import { listOption, UsageError } from '../kit/args.js';
import { DATA_LAYERS, type LayerName } from '../kit/data-layers/index.js';

/**
 * `--data-layer a,b,c` of the bench: the layers to run beside raw pg (`pg` in the list
 * is the raw-pg run every layer is compared with, always there); undefined when absent.
 */
export function dataLayerList(raw: string | undefined): LayerName[] | undefined {
  if (raw === undefined) return undefined;
  if (raw.trim() === '')
    throw new UsageError(`--data-layer: a comma-separated list of ${DATA_LAYERS.join(', ')}`);
  const names = listOption('data-layer', raw, DATA_LAYERS);
  return [...new Set(names.filter((n): n is LayerName => n !== 'pg'))];
}
