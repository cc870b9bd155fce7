/* Build and capability queries of the compiled path: plain C, no Python API.
 *
 * Compiled into the extension with the other files, its functions are called through
 * ctypes by _transport/mpi.py (shoal info asks them); compiled alone with
 * -DSHOAL_QUERY_MAIN it is the probe program the install-time build runs to record the
 * MPI library it compiled against (native.py, describe_build).
 *
 * Every MPIX_ query is guarded twice: by the macros its header defines (so this file
 * compiles against any MPI) and as a weak symbol (so a library whose header declares
 * a query it does not export still loads; the query then reads as absent).
 */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#if defined(OPEN_MPI) && defined(__has_include)
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif
#endif

#if defined(MPIX_GPU_SUPPORT_CUDA)
#pragma weak MPIX_GPU_query_support
#define SHOAL_HAS_GPU_QUERY 1
#elif defined(MPIX_CUDA_AWARE_SUPPORT)
#pragma weak MPIX_Query_cuda_support
#define SHOAL_HAS_CUDA_QUERY 1
#endif

/* Ask the MPI library whether it sends from and receives into CUDA device memory (MPI
 * must be initialized). *flag: its answer (1 yes, 0 no). Returns the query used:
 * 1 MPIX_GPU_query_support (MPICH >= 4), 2 MPIX_Query_cuda_support (Open MPI),
 * 0 none (this MPI has no such query), -1 the query failed. */
int shoal_query_cuda(int *flag) {
    *flag = 0;
#if defined(SHOAL_HAS_GPU_QUERY)
    if (MPIX_GPU_query_support == NULL) return 0;
    if (MPIX_GPU_query_support(MPIX_GPU_SUPPORT_CUDA, flag) != MPI_SUCCESS) return -1;
    return 1;
#elif defined(SHOAL_HAS_CUDA_QUERY)
    if (MPIX_Query_cuda_support == NULL) return 0;
    *flag = MPIX_Query_cuda_support();
    return 2;
#else
    return 0;
#endif
}

/* The MPI whose mpi.h this file was compiled against, e.g. "MPICH 5.0.2 (MPI 4.1)". */
const char *shoal_mpi_header(void) {
    static char text[128];
#if defined(MPICH_VERSION)
    snprintf(text, sizeof text, "MPICH %s (MPI %d.%d)", MPICH_VERSION, MPI_VERSION, MPI_SUBVERSION);
#elif defined(OPEN_MPI)
    snprintf(text, sizeof text, "Open MPI %d.%d.%d (MPI %d.%d)", OMPI_MAJOR_VERSION, OMPI_MINOR_VERSION,
             OMPI_RELEASE_VERSION, MPI_VERSION, MPI_SUBVERSION);
#else
    snprintf(text, sizeof text, "MPI %d.%d", MPI_VERSION, MPI_SUBVERSION);
#endif
    return text;
}

#ifdef SHOAL_QUERY_MAIN
/* The probe: the header line, then the library's own version string (callable before
 * MPI_Init since MPI 3.0, so the probe needs no launcher). */
int main(void) {
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int n = 0;
    if (MPI_Get_library_version(version, &n) != MPI_SUCCESS) return 1;
    printf("%s\n", shoal_mpi_header());
    fwrite(version, 1, (size_t)n, stdout);
    return 0;
}
#endif
