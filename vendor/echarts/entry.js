import { use, init, dispose, getInstanceByDom, format } from "echarts/core";
import { ParallelChart, ScatterChart } from "echarts/charts";
import {
  BrushComponent, DataZoomComponent, GridComponent, ParallelComponent, ToolboxComponent,
  TooltipComponent
} from "echarts/components";
import { CanvasRenderer } from "echarts/renderers";

use([ParallelChart, ScatterChart, BrushComponent, DataZoomComponent, GridComponent,
     ParallelComponent, ToolboxComponent, TooltipComponent, CanvasRenderer]);

export { init, dispose, getInstanceByDom, format };
