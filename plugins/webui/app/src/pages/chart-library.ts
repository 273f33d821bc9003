/** uPlot with its stylesheet: the chunk `Chart` fetches when the first chart mounts. */
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';

export default uPlot;
