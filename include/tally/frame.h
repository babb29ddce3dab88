/* A frame of a call stack: an image (an index into the images of the
 * recording or database that holds it) and an offset in it. The aggregate
 * builds them while recording (agg.h), a database keeps them (db.h). */
#ifndef TALLY_FRAME_H
#define TALLY_FRAME_H

#include <stdint.h>

struct tally_frame {
	uint32_t image;
	uint64_t offset;
};

#endif
