# toolkit-headers.cmake — let find_package(CUDAToolkit) find a CUDA toolkit that has no nvcc.
#
# libcgjit and the tools need only the toolkit's headers (cuda.h, cublas, cudnn where present)
# and, for the tests, the CUDA runtime library; nvcc builds the bench and the GPU tests alone. But
# FindCUDAToolkit of the CMake versions cgjit supports locates the toolkit through nvcc, or
# through a version.txt that toolkits since CUDA 11.1 no longer ship, so a machine with the
# headers and no compiler (a packager's build root, a cuda-*-dev install without cuda-nvcc)
# would fail there. Where no nvcc is found, the first of CUDAToolkit_ROOT, $CUDA_HOME,
# $CUDA_PATH and /usr/local/cuda that holds include/cuda.h is handed to FindCUDAToolkit as the
# toolkit (its bin folder need not exist). Where nvcc is found, nothing changes.
if(CMAKE_CUDA_COMPILER_LOADED OR CUDAToolkit_BIN_DIR)
  return()
endif()
set(CGJ_TOOLKIT_ROOTS ${CUDAToolkit_ROOT} $ENV{CUDAToolkit_ROOT} $ENV{CUDA_HOME} $ENV{CUDA_PATH}
    /usr/local/cuda)
set(CGJ_TOOLKIT_BINS ${CGJ_TOOLKIT_ROOTS})
list(TRANSFORM CGJ_TOOLKIT_BINS APPEND /bin)
find_program(CGJ_TOOLKIT_NVCC nvcc HINTS ${CGJ_TOOLKIT_BINS})
mark_as_advanced(CGJ_TOOLKIT_NVCC)
if(CGJ_TOOLKIT_NVCC)
  return()
endif()
foreach(root IN LISTS CGJ_TOOLKIT_ROOTS)
  if(EXISTS ${root}/include/cuda.h)
    message(STATUS "No nvcc: the CUDA toolkit's headers and libraries are taken from ${root}")
    set(CUDAToolkit_BIN_DIR ${root}/bin CACHE PATH "the CUDA toolkit's bin folder")
    break()
  endif()
endforeach()
